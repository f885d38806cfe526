/**
 * One function for every transport: find the operation, check the caller's
 * scope, validate its arguments, forward when peer_id names another member,
 * run it, and write the activity row of a mutating call (exactly one, on the
 * node that runs it).
 */
import type { Logger } from 'pino';
import type { ActivityCategory, NewActivity, Operation, Severity } from './registry/types.js';
import { getOperation } from './registry/index.js';
import type { HandlerTable } from './handlers.js';
import { validateArgs } from './validate.js';
import { ApiError, conflict, errorBody, forbidden, notFound } from '../daemon/lib/errors.js';
import { isAdministrator, type ActivityNote, type Args, type CallContext, type Caller, type Handler } from '../daemon/lib/caller.js';
import { RefusalThrottle, describeDetails, type Suppressed, type TraceLimits } from '../daemon/lib/throttle.js';

/** A member a call can be forwarded to (looked up once, by `Forwarder.resolve`). */
/**
 * What dispatch needs of the activity log (daemon/activity/log.ts implements
 * it): a place for the one row of each mutating call, and a hook to flush its
 * own buffered rows before the log closes.
 */
export interface ActivitySink {
  record(row: NewActivity, opts?: { durable?: boolean }): Promise<unknown>;
  beforeClose(fn: () => void | Promise<void>): void;
}

export interface PeerRoute {
  /**
   * Runs the call on that member; rejects with ApiError (its 4xx, or 502
   * naming it). With `asText`, the answer may come as the member's JSON text
   * (a JsonText, api/json-text.ts) for the transport to send on as it is.
   */
  forward(op: Operation, args: Args, caller: Caller, requestId: string, asText?: boolean): Promise<unknown>;
}

/** How dispatch reaches other members; provided by the cluster. */
export interface Forwarder {
  /** Resolves a peer_id: 'self' for this node, a route to another member, undefined when unknown. */
  resolve(peerId: string): 'self' | PeerRoute | undefined;
}

export interface DispatchDeps {
  handlers: HandlerTable;
  activity: ActivitySink;
  forwarder: Forwarder;
  log: Logger;
}

/**
 * Refused calls recorded one by one per token: 20 at once, then one every
 * 2 s; the rest are counted into one summary row per token a minute
 * (docs/api-decisions.md, "Activity").
 */
export const REFUSED_CALL_TRACE: TraceLimits = { burst: 20, everyMs: 2000, windowMs: 60_000, maxKeys: 4096 };

/**
 * A call refused without being run anywhere, though it got past the checks
 * dispatch makes itself (a forwarder that knows the member cannot answer
 * now): recorded like a refusal.
 */
export class RefusedCall extends ApiError {}

interface FailureContext {
  tokenName: string;
  transport: Caller['transport'];
  origin: string;
}

export class Dispatch {
  private readonly refusals: RefusalThrottle<FailureContext>;

  constructor(private readonly deps: DispatchDeps) {
    this.refusals = new RefusalThrottle<FailureContext>(REFUSED_CALL_TRACE, (s) => void this.recordSuppressed(s));
    // Counts not yet summarized are written before the log closes.
    deps.activity.beforeClose(() => this.refusals.flush());
  }

  /** Throws 403 unless the caller holds every scope the operation names. */
  authorize(op: Operation, caller: Caller): void {
    if (op.admin) {
      if (isAdministrator(caller)) return;
      throw forbidden(
        caller.transport === 'cluster'
          ? `${op.name} is for the local administrator of each member only and is never run for a forwarded call`
          : `${op.name} is for the local administrator only (admin socket or console administrator session); no API token may call it, whatever its scopes (token '${caller.tokenName}')`,
      );
    }
    if (op.scopes.every((s) => caller.scopes.includes(s))) return;
    const missing = op.scopes.filter((s) => !caller.scopes.includes(s));
    throw forbidden(`token '${caller.tokenName}' lacks scope ${missing.map((s) => `'${s}'`).join(' and ')} needed by ${op.name}`);
  }

  /**
   * Runs an operation for a caller. `args` are the assembled arguments (path
   * parameters included). Throws ApiError; the caller's transport renders it.
   */
  async call(opOrName: Operation | string, argsIn: Args | (() => Args | Promise<Args>), caller: Caller, requestId: string): Promise<unknown> {
    const op = typeof opOrName === 'string' ? getOperation(opOrName) : opOrName;
    if (!op) throw notFound(`no operation named '${String(opOrName)}'`);
    let note: ActivityNote = {};
    let forwarded = false;
    // A refusal until the operation is run, here or on a member.
    let refused = true;
    let args: Args = {};
    try {
      this.authorize(op, caller);
      // A transport may hand over a loader so that reading and parsing the
      // request happen only after the scope check, and its failures are recorded.
      // A request without a body has its arguments at once: no turn of the event loop is waited for them.
      if (typeof argsIn === 'function') {
        const loaded = argsIn();
        args = loaded instanceof Promise ? await loaded : loaded;
      } else args = argsIn;
      validateArgs(op, args);
      let local = args;
      if (op.peerId === 'forward' && typeof args.peer_id === 'string') {
        // peer_id is taken out here, once, whatever the transport.
        const { peer_id, ...rest } = args;
        local = rest;
        // A call that came over the cluster has made its one hop: it runs here.
        if (caller.transport !== 'cluster') {
          const where = this.deps.forwarder.resolve(peer_id);
          if (!where) throw notFound(`peer '${peer_id}' not found`);
          if (where !== 'self') {
            forwarded = true;
            refused = false;
            // Its answer goes back to the transport, which sends the member's JSON text on without parsing it (text answers excepted).
            return await where.forward(op, rest, caller, requestId, !op.textResult);
          }
        }
      }
      const ctx: CallContext = {
        caller,
        requestId,
        // The row below is written, synced, whatever the handler does but forwardTo (see NoteSink).
        rowSyncs: !op.readOnly,
        note: (n) => {
          note = { ...note, ...n, metadata: { ...note.metadata, ...n.metadata } };
        },
        forwardTo: async (peerId) => {
          if (caller.transport === 'cluster')
            throw conflict(`${op.name} must run on ${peerId}, and a call forwarded once is not forwarded again; call ${peerId} directly`);
          const where = this.deps.forwarder.resolve(peerId);
          if (!where) throw notFound(`peer '${peerId}' not found`);
          if (where === 'self') throw conflict(`${op.name} was handed to this node itself`);
          forwarded = true;
          return where.forward(op, local, caller, requestId);
        },
      };
      // The arguments were validated against this operation's schema just above: they are its ArgsOf.
      const handler = this.deps.handlers[op.name as keyof HandlerTable] as Handler;
      refused = false;
      const result = await handler(local, ctx);
      // A call the handler handed to a member is recorded there.
      if (!op.readOnly && !forwarded) await this.record(op, args, caller, requestId, note, undefined);
      return result;
    } catch (err) {
      // A forwarded call is recorded by the member that ran it; the origin
      // records only when the member could not be reached to run it (502).
      const status = errorBody(err).status;
      const refusal = refused || err instanceof RefusedCall;
      if (!op.readOnly && (!forwarded || status === 502) && (!refusal || this.admitRefusal(op, caller, status))) {
        await this.record(op, args, caller, requestId, note, err).catch((e) => this.deps.log.error({ err: e }, 'activity write failed'));
      }
      throw err;
    }
  }

  /**
   * Records an operator event that is not an API call (hostctl over the admin
   * socket, cluster membership): the activity log has one writer, dispatch.
   */
  async audit(e: {
    category: ActivityCategory;
    severity: Severity;
    summary: string;
    target: string;
    actor: string;
    metadata: Record<string, unknown> & { transport: string };
  }): Promise<void> {
    await this.deps.activity.record(e);
  }

  /**
   * Whether a refused call (scope, body, arguments, unknown peer: refused
   * before it ran) gets its own row. The local administrator's always do; a
   * token's do while its refusals stay within REFUSED_CALL_TRACE, and the
   * rest are counted for its summary row. Calls that ran, failed or not,
   * always get their row.
   */
  private admitRefusal(op: Operation, caller: Caller, status: number): boolean {
    if (caller.tokenId === 'admin' && caller.transport !== 'cluster') return true;
    const key = caller.transport === 'cluster' ? `${caller.origin}/${caller.tokenId}` : caller.tokenId;
    return this.refusals.admit(key, `${status} ${op.name}`, { tokenName: caller.tokenName, transport: caller.transport, origin: caller.origin });
  }

  /** The summary row of one token's refused calls that were only counted. */
  private async recordSuppressed(s: Suppressed<FailureContext>): Promise<void> {
    const { tokenName, transport, origin } = s.context;
    const metadata: Record<string, unknown> & { transport: string } = { transport, suppressed: s.count, since: s.since, until: s.until, details: s.details };
    if (transport === 'cluster') metadata.origin = origin;
    await this.deps.activity
      .record({
        category: 'auth',
        severity: 'warning',
        summary: `${s.count} more refused calls by token '${tokenName}' between ${s.since} and ${s.until}, not recorded one by one (${describeDetails(s.details)})`,
        target: `tokens/${tokenName}`,
        actor: tokenName,
        metadata,
      })
      .catch((e) => this.deps.log.error({ err: e }, 'activity write failed'));
  }

  private async record(op: Operation, args: Args, caller: Caller, requestId: string, note: ActivityNote, err: unknown): Promise<void> {
    const failed = err !== undefined;
    const e = failed ? errorBody(err) : undefined;
    const metadata: Record<string, unknown> & { transport: string } = {
      ...(note.metadata ?? {}),
      transport: caller.transport,
      operation: op.name,
      request_id: requestId,
      status: e?.status ?? op.successStatus,
    };
    if (caller.transport === 'cluster') metadata.origin = caller.origin;
    if (caller.client) metadata.client = caller.client;
    if (e) metadata.error = e.body.error;
    if (typeof args.peer_id === 'string' && e?.status === 502) metadata.peer_id = args.peer_id;
    await this.deps.activity.record({
      category: op.category,
      severity: failed ? 'warning' : 'info',
      summary: failed ? `${op.summary.replace(/\.$/, '')} failed: ${e!.body.error}` : (note.summary ?? op.summary.replace(/\.$/, '')),
      target: note.target ?? targetLabel(op, args),
      actor: caller.tokenName,
      metadata,
    });
  }
}

/** A readable label from the path parameters, e.g. `vms/12` or `folders/f_ab/entries/a.txt`. */
function targetLabel(op: Operation, args: Args): string {
  return op.segments.map((s) => (s.startsWith('{') ? String(args[s.slice(1, -1)] ?? s) : s)).join('/');
}
