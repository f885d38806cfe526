/**
 * The cluster RPC service, peer side: what this node answers to other members.
 * A forwarded call is checked (origin matches the certificate, the token is in
 * the origin's directory, the claimed scopes are the token's) and then run by
 * dispatch, which writes its activity row with transport `cluster`. The other
 * RPCs go to the job that owns them.
 */
import crypto from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import type { Dispatch } from '../api/dispatch.js';
import { jsonOf } from '../api/json-text.js';
import type { Caller } from '../daemon/lib/caller.js';
import { ApiError, errorBody } from '../daemon/lib/errors.js';
import type { EventService } from '../daemon/events/service.js';
import { controlEvent, cursorAt } from '../daemon/events/subscription.js';
import type { Member } from './membership.js';
import { RpcError, type ClusterHandlers, type EventSinkLike } from './server.js';
import type { ClusterMesh } from './mesh.js';
import type { Pairing } from './pairing.js';
import type { Probes } from './probes.js';
import type { TokenSync } from './token-sync.js';
import type * as W from './proto.js';

export class RpcService implements ClusterHandlers {
  private dispatch?: Dispatch;
  private events?: EventService;

  constructor(
    private readonly mesh: ClusterMesh,
    private readonly pairing: Pairing,
    private readonly probes: Probes,
    private readonly tokens: TokenSync,
  ) {}

  setDispatch(dispatch: Dispatch): void {
    this.dispatch = dispatch;
  }

  setEvents(events: EventService): void {
    this.events = events;
  }

  /**
   * The caller of a forwarded request: the origin must be the certificate's
   * member, the token in that member's directory, the claimed scopes the
   * token's. A refusal as [status, message].
   */
  private async callerOf(origin: string, c: W.WireCaller | undefined, peer: Member): Promise<Caller | [number, string]> {
    const log = this.mesh.log;
    if (origin !== peer.peer_id) {
      log.warn({ peer_id: peer.peer_id, claimed: String(origin).slice(0, 64) }, 'forwarded call refused: origin does not match the client certificate');
      return [403, `the calling member is '${peer.peer_id}', not '${origin}'`];
    }
    const wc = c ?? { token_id: '', token_name: '', scopes: [] };
    let tok = this.mesh.directory.lookup(peer.peer_id, wc.token_id);
    if (!tok) {
      await this.tokens.pull(peer);
      tok = this.mesh.directory.lookup(peer.peer_id, wc.token_id);
    }
    if (!tok) {
      log.warn({ peer_id: peer.peer_id, token_id: String(wc.token_id).slice(0, 64) }, 'forwarded call refused: token unknown to the directory');
      return [403, `token '${wc.token_name || wc.token_id}' is not a token of member '${peer.name}' (${peer.peer_id}) in this node's token directory`];
    }
    const claimed = [...new Set(wc.scopes ?? [])];
    const extra = claimed.filter((s) => !tok!.scopes.includes(s));
    if (extra.length) {
      log.warn({ peer_id: peer.peer_id, token_id: tok.id, extra }, 'forwarded call refused: claimed scopes exceed the token');
      return [403, `forwarded scopes exceed those of token '${tok.name}': ${extra.join(', ')}`];
    }
    return { tokenId: tok.id, tokenName: tok.name, scopes: claimed, transport: 'cluster', origin: peer.peer_id };
  }

  /** A forwarded event stream: the caller checked like a forwarded call, then this member's stream under the caller's scopes. */
  async rpcEventStream(req: W.EventStreamRequest, peer: Member, sink: EventSinkLike): Promise<() => void> {
    if (!this.events) throw new ApiError(503, 'this node is starting');
    const caller = await this.callerOf(req.origin, req.caller, peer);
    if (Array.isArray(caller)) throw new ApiError(caller[0], caller[1]);
    let args: Record<string, unknown>;
    try {
      const parsed = JSON.parse(req.args_json || '{}');
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
      args = parsed;
    } catch {
      throw new ApiError(400, 'forwarded arguments are not a JSON object');
    }
    const str = (k: string) => (typeof args[k] === 'string' ? (args[k] as string) : undefined);
    const streamArgs = { cursor: str('cursor'), types: str('types'), resource: str('resource'), task_id: str('task_id') };
    this.events.precheck(caller, streamArgs, req.last_event_id || undefined);
    // The empty first message says the stream is open (refusals came before it).
    sink.send('', '');
    this.mesh.log.info({ peer_id: peer.peer_id, token: caller.tokenName, transport: 'cluster', req_id: req.request_id }, 'forwarded event stream opened');
    // A members=all stream asks where this member starts (it may start from now): a bookmark of that position comes first.
    if (args.announce_start === true) {
      const start = this.events.start(streamArgs.cursor ?? (req.last_event_id || undefined), true);
      if ('seq' in start)
        sink.send(
          JSON.stringify(controlEvent(this.events.log, 'bookmark', start.seq, "where this member's stream starts")),
          cursorAt(this.events.log, start.seq),
        );
    }
    const sub = this.events.openStream(caller, streamArgs, sink, req.last_event_id || undefined, { announceCaughtUp: args.announce_start === true });
    return () => sub?.close();
  }

  /** One forwarded call (a frame of `peer`'s CallStream): origin, token directory and scope checks, then dispatch. */
  async rpcCall(req: W.CallFrame, peer: Member): Promise<W.CallOutcome> {
    const fail = (status: number, error: string): W.CallOutcome => ({ ok: false, result_json: '', status, error });
    if (!this.dispatch) return fail(503, 'this node is starting');
    const caller = await this.callerOf(req.origin, req.caller, peer);
    if (Array.isArray(caller)) return fail(caller[0], caller[1]);
    let args: Record<string, unknown>;
    try {
      const parsed = JSON.parse(req.args_json || '{}');
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
      args = parsed;
    } catch {
      return fail(400, 'forwarded arguments are not a JSON object');
    }
    try {
      // Dispatch never forwards a call that came over the cluster: one hop only.
      const result = await this.dispatch.call(req.operation, args, caller, req.request_id || `fwd-${crypto.randomBytes(4).toString('hex')}`);
      return { ok: true, result_json: jsonOf(result ?? {}), status: 200, error: '' };
    } catch (err) {
      const e = errorBody(err);
      return fail(e.status, e.body.error);
    }
  }

  rpcHealth(req: W.HealthRequest, peer: Member): Promise<W.HealthReply> {
    return this.probes.rpcHealth(req, peer);
  }

  rpcJoin(req: W.JoinRequest, remote: string): Promise<W.JoinReply> {
    return this.pairing.rpcJoin(req, remote);
  }

  rpcMembership(req: W.MembershipUpdate, peer: Member): Promise<W.Ack> {
    return this.pairing.rpcMembership(req, peer);
  }

  rpcTokenDirectory(req: W.DirectorySnapshot, peer: Member): Promise<W.Ack> {
    return this.tokens.rpcTokenDirectory(req, peer);
  }

  rpcTokenDirectoryGet(peer: Member): Promise<W.DirectorySnapshot> {
    return this.tokens.rpcTokenDirectoryGet(peer);
  }

  async rpcLease(msg: unknown, peer: Member): Promise<unknown> {
    if (!this.mesh.hooks.handleLease) throw new RpcError(grpc.status.UNIMPLEMENTED, 'this node has no lease module');
    checkFrom(msg, peer);
    return this.mesh.hooks.handleLease(msg, peer.peer_id);
  }

  async rpcProxyConfig(msg: unknown, peer: Member): Promise<unknown> {
    if (!this.mesh.hooks.handleProxyConfig) throw new RpcError(grpc.status.UNIMPLEMENTED, 'this node has no proxy configuration store');
    checkFrom(msg, peer);
    return this.mesh.hooks.handleProxyConfig(msg, peer.peer_id);
  }
}

/** A lease or proxy-config message must name as its sender the member whose certificate sent it. */
function checkFrom(msg: unknown, peer: Member): void {
  const from = (msg as { from?: unknown } | null)?.from;
  if (from !== undefined && from !== peer.peer_id)
    throw new RpcError(grpc.status.PERMISSION_DENIED, `message claims to be from '${String(from).slice(0, 64)}' but was sent by '${peer.peer_id}'`);
}
