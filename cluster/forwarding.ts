/**
 * Forwarding, origin side: the Forwarder dispatch uses. `resolve` looks the
 * member up once; the route it returns runs the call on that member over its
 * CallStream. Its 4xx answers come back unchanged; unreachable, too slow, or a
 * 5xx become 502 naming it.
 *
 *   peer_id of this node      -> 'self' (runs here)
 *   peer_id of another member -> a route (forwarded; deadline config.forwardDeadlineMs)
 *   anything else             -> undefined (dispatch answers 404)
 */
import * as grpc from '@grpc/grpc-js';
import { ApiError, badGateway, forbidden } from '../daemon/lib/errors.js';
import { RefusedCall, type Forwarder, type PeerRoute } from '../api/dispatch.js';
import type { Caller } from '../daemon/lib/caller.js';
import { JsonText } from '../api/json-text.js';
import type { Member } from './membership.js';
import { grpcCode } from './client.js';
import { MAX_ARGS_BYTES } from './call-stream.js';
import type { ClusterMesh } from './mesh.js';
import type * as W from './proto.js';

export class Forwarding implements Forwarder {
  constructor(private readonly mesh: ClusterMesh) {}

  resolve(peerId: string): 'self' | PeerRoute | undefined {
    if (peerId === this.mesh.selfId) return 'self';
    if (!this.mesh.inCluster) return undefined;
    const member = this.mesh.membership.get(peerId);
    return member ? { forward: (op, args, caller, requestId, asText) => this.forward(member, op.name, args, caller, requestId, asText) } : undefined;
  }

  /**
   * Opens a member's event stream for a caller (events_stream with peer_id):
   * refusals come back with the member's status; an unreachable member is
   * 502 naming it. Each message goes to `sink`; the sink is ended when the
   * member's stream ends.
   */
  async stream(
    peerId: string,
    caller: Caller,
    args: object,
    lastEventId: string | undefined,
    requestId: string,
    sink: { send(text: string, id: string): boolean; drained(): Promise<void>; end(): void },
  ): Promise<() => void> {
    const member = this.mesh.membership.get(peerId);
    if (!member) throw new ApiError(404, `peer '${peerId}' not found`);
    if (caller.tokenId === 'admin') {
      throw forbidden(
        `streams opened over the local admin socket read only this node; to read peer '${member.name}' (${member.peer_id}), use an API token over HTTP or run hostctl on that node`,
      );
    }
    const label = `peer '${member.name}' (${member.peer_id})`;
    try {
      return await this.mesh.clients.eventStream(
        member,
        {
          caller: { token_id: caller.tokenId, token_name: caller.tokenName, scopes: caller.scopes },
          origin: this.mesh.selfId,
          args_json: JSON.stringify(args),
          last_event_id: lastEventId ?? '',
          request_id: requestId,
        },
        (m) => (sink.send(m.text, m.id) ? undefined : sink.drained()),
        () => sink.end(),
      );
    } catch (err) {
      const status = Number((err as { metadata?: grpc.Metadata }).metadata?.get('hostd-status')?.[0]);
      if (status >= 400 && status < 600) throw new ApiError(status, String((err as { details?: string }).details ?? 'refused'));
      throw badGateway(`${label} could not be reached to stream its events: ${String((err as { details?: string }).details ?? (err as Error).message)}`);
    }
  }

  private async forward(member: Member, operation: string, args: Record<string, unknown>, caller: Caller, requestId: string, asText = false): Promise<unknown> {
    if (caller.tokenId === 'admin') {
      throw forbidden(
        `calls made over the local admin socket run only on this node; to reach peer '${member.name}' (${member.peer_id}), use an API token over HTTP or run hostctl on that node`,
      );
    }
    const label = `peer '${member.name}' (${member.peer_id})`;
    const deadline = this.mesh.options.config.forwardDeadlineMs;
    const argsJson = JSON.stringify(args);
    if (argsJson.length > MAX_ARGS_BYTES / 3 && Buffer.byteLength(argsJson) > MAX_ARGS_BYTES)
      throw new ApiError(413, `arguments of ${operation} are too large to forward to ${label}`);
    const circuits = this.mesh.circuits;
    const gate = circuits.admit(member.peer_id);
    if (!gate.go) {
      // Known unreachable: answer now rather than after the deadline. Not sent, so recorded as a refusal.
      throw new RefusedCall(
        502,
        `${label} is unreachable at ${member.address} (${gate.reason}, since ${gate.since}); the call was not sent${gate.retryInMs < 0 ? ' (the health probe retries)' : `, next try in ${Math.ceil(gate.retryInMs / 1000)} s`}`,
      );
    }
    const sentAt = Date.now();
    let reply: W.CallOutcome;
    try {
      reply = await this.mesh.clients.call(
        member,
        {
          operation,
          args_json: argsJson,
          caller: { token_id: caller.tokenId, token_name: caller.tokenName, scopes: caller.scopes },
          origin: this.mesh.selfId,
          request_id: requestId,
        },
        deadline,
      );
    } catch (err) {
      const code = grpcCode(err);
      if (code === grpc.status.DEADLINE_EXCEEDED) {
        // Silent since the call left: hung or cut off. Answering other calls meanwhile: this one is just slow.
        if (!circuits.heardSince(member.peer_id, sentAt)) circuits.failed(member.peer_id, `no answer within ${deadline} ms`);
        else circuits.trialDone(member.peer_id);
        throw badGateway(`${label} did not answer within ${deadline} ms`);
      }
      if (code === grpc.status.UNAUTHENTICATED || code === grpc.status.PERMISSION_DENIED) {
        circuits.answered(member.peer_id);
        throw badGateway(`${label} refused this node: ${(err as grpc.ServiceError).details}`);
      }
      if (code === grpc.status.CANCELLED) circuits.trialDone(member.peer_id);
      else circuits.failed(member.peer_id, grpcDetail(err));
      throw badGateway(`${label} is unreachable at ${member.address}: ${grpcDetail(err)}`);
    }
    circuits.answered(member.peer_id);
    if (reply.ok) {
      if (!reply.result_json) return {};
      // The transport sends the member's text on as it is; a handler that forwarded gets the object.
      return asText ? new JsonText(reply.result_json) : JSON.parse(reply.result_json);
    }
    const status = Number(reply.status) || 500;
    if (status >= 500) throw badGateway(`${label} failed to run ${operation}: ${reply.error} (${status})`);
    throw new ApiError(status, reply.error);
  }
}

/** A grpc error's message without grpc-js's connection boilerplate. */
export function grpcDetail(err: unknown): string {
  const e = err as grpc.ServiceError;
  let d = e?.details || e?.message || String(err);
  d = d.replace(/\.?\s*Resolution note:.*$/s, '').replace(/^No connection established\. Last error: (Error: )?/, '');
  return d || 'no answer';
}
