/**
 * What an anonymous client of the cluster port can cost this node.
 *
 * `Join` is the one RPC open to a connection without a client certificate,
 * so anyone who can reach the port can call it. Its request is checked field
 * by field, each bounded, before anything is written, logged or looked up;
 * the message itself is capped far below the members' limit (server.ts).
 * Refusals leave a bounded trace: the first ones are recorded one by one (an
 * activity row and a warn line), then at most one every few seconds, and the
 * rest are counted and summarized once a minute (daemon/lib/throttle.ts).
 * Only text this node wrote goes into a row or a log line: the remote
 * address, a reason code, and the node id only once it passed its pattern.
 * At most a few joins are handled at once; more get RESOURCE_EXHAUSTED.
 */
import net from 'node:net';
import type { Logger } from 'pino';
import { RefusalThrottle, SHARED_KEY, describeDetails, type TraceLimits } from '../daemon/lib/throttle.js';
import { JoinTokenError, parseJoinToken } from '../certs/join-tokens.js';
import type { AuditEvent } from './audit.js';
import type * as W from './proto.js';

/** A node id: what certificates carry as CN and members are keyed by. */
export const NODE_ID = /^[A-Za-z0-9_.-]{1,64}$/;
/** host:port with a bounded host (a name, an IPv4 or a bracketed IPv6 address). */
export const ADDRESS = /^(?:[A-Za-z0-9.-]{1,253}|\[[0-9A-Fa-f:.]{2,45}\]):(\d{1,5})$/;
const NAME_MAX = 128;
const TOKEN_MAX = 256;
const CSR_MAX = 16 * 1024;
// Control characters (and DEL) have no place in a node's display name.
const CONTROL = /[\u0000-\u001f\u007f]/;

/** The largest Join request the port reads from a client without a certificate. */
export const JOIN_MESSAGE_MAX = 64 * 1024;
/** Joins handled at once; a further one is answered RESOURCE_EXHAUSTED at once. */
export const JOINS_IN_FLIGHT_MAX = 4;

/** How many refused joins are recorded one by one, per minute, whoever sends them. */
export const JOIN_TRACE: TraceLimits = { burst: 10, everyMs: 6000, windowMs: 60_000, maxKeys: 1 };

export type JoinRefusal = 'malformed' | 'unknown' | 'mismatch' | 'expired' | 'busy';

export interface BadJoin {
  reason: JoinRefusal;
  /** Names the field and the rule, never the value. */
  message: string;
}

/** Checks every field of a Join request; nothing of the request is trusted before this. */
export function checkJoinRequest(req: Partial<W.JoinRequest>): BadJoin | null {
  const bad = (message: string): BadJoin => ({ reason: 'malformed', message });
  const { token, node_id: nodeId, name, address, csr_pem: csr } = req;
  if (typeof token !== 'string' || token.length > TOKEN_MAX) return bad('token is not a join token');
  try {
    parseJoinToken(token);
  } catch {
    return bad('token is not a join token');
  }
  if (typeof nodeId !== 'string' || !NODE_ID.test(nodeId)) return bad('node_id must be 1-64 characters of letters, digits, _ . -');
  if (typeof name !== 'string' || name.length > NAME_MAX || CONTROL.test(name))
    return bad(`name must be at most ${NAME_MAX} characters, without control characters`);
  const port = typeof address === 'string' ? ADDRESS.exec(address)?.[1] : undefined;
  if (!port || Number(port) < 1 || Number(port) > 65535) return bad('address must be host:port');
  if (typeof csr !== 'string' || csr.length > CSR_MAX || !csr.startsWith('-----BEGIN CERTIFICATE REQUEST-----'))
    return bad(`csr_pem must be a PEM certificate request of at most ${CSR_MAX} bytes`);
  return null;
}

/** The address part of grpc-js's `call.getPeer()` ("1.2.3.4:5678", "[::1]:5678"). */
export function remoteHost(peer: string): string {
  const m = /^\[?([^\]]*?)\]?:\d+$/.exec(peer);
  const host = m ? m[1] : peer;
  return net.isIP(host) ? host : 'unknown';
}

export class JoinGuard {
  private inFlight = 0;
  private readonly trace: RefusalThrottle<null>;

  constructor(
    private readonly log: Logger,
    private readonly audit: (event: AuditEvent) => Promise<void>,
    limits: TraceLimits = JOIN_TRACE,
  ) {
    this.trace = new RefusalThrottle<null>(limits, (s) => {
      const reasons = describeDetails(s.details);
      this.log.warn({ refused: s.count, since: s.since, until: s.until, reasons: s.details }, 'join refused (summary of refusals not logged one by one)');
      void this.audit({
        category: 'auth',
        severity: 'warning',
        summary: `${s.count} more cluster joins refused between ${s.since} and ${s.until} (${reasons})`,
        target: 'cluster/join',
        actor: 'anonymous',
        metadata: { transport: 'cluster', refused: s.count, since: s.since, until: s.until, details: s.details },
      });
    });
  }

  /** A join may start (false: too many at once). Pair with `leave()`. */
  enter(): boolean {
    if (this.inFlight >= JOINS_IN_FLIGHT_MAX) return false;
    this.inFlight++;
    return true;
  }

  leave(): void {
    this.inFlight--;
  }

  /**
   * Leaves the trace of a refused join: recorded one by one while the rate
   * allows, else counted for the next summary. `nodeId` only if it passed
   * its pattern.
   */
  refused(remote: string, reason: JoinRefusal, message: string, nodeId?: string): void {
    const detail = `${reason} from ${remote}`;
    if (!this.trace.admit(SHARED_KEY, detail, null)) return;
    const fields: Record<string, unknown> = { remote, reason };
    if (nodeId) fields.node_id = nodeId;
    this.log.warn(fields, 'join refused');
    void this.audit({
      category: 'auth',
      severity: 'warning',
      summary: `Cluster join${nodeId ? ` by node ${nodeId}` : ''} from ${remote} refused: ${message}`,
      target: 'cluster/join',
      actor: 'anonymous',
      metadata: { transport: 'cluster', ...fields },
    });
  }

  /** Writes the pending summary (daemon stop). */
  close(): void {
    this.trace.flush();
    this.trace.stop();
  }
}

/** The reason code and our own message for a join token the store refused. */
export function tokenRefusal(err: unknown): BadJoin {
  if (err instanceof JoinTokenError) return { reason: err.reason === 'malformed' ? 'malformed' : err.reason, message: err.message };
  return { reason: 'unknown', message: 'join token could not be checked' };
}
