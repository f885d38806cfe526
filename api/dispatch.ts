/**
 * One function for every transport: find the operation, check the caller's
 * scope, validate its arguments, forward when peer_id names another member,
 * run it, and write the activity row of a mutating call (exactly one, on the
 * node that runs it).
 */
import type { Logger } from 'pino';
import type { ActivityCategory, Operation, Severity } from './registry/types.js';
import { getOperation } from './registry/index.js';
import type { HandlerTable } from './handlers.js';
import { validateArgs } from './validate.js';
import { conflict, errorBody, forbidden, notFound } from '../daemon/lib/errors.js';
import type { ActivityNote, Args, CallContext, Caller, Handler } from '../daemon/lib/caller.js';
import type { ActivityLog } from '../daemon/activity/log.js';

/** A member a call can be forwarded to (looked up once, by `Forwarder.resolve`). */
export interface PeerRoute {
  /** Runs the call on that member; rejects with ApiError (its 4xx, or 502 naming it). */
  forward(op: Operation, args: Args, caller: Caller, requestId: string): Promise<unknown>;
}

/** How dispatch reaches other members; provided by the cluster. */
export interface Forwarder {
  /** Resolves a peer_id: 'self' for this node, a route to another member, undefined when unknown. */
  resolve(peerId: string): 'self' | PeerRoute | undefined;
}

export interface DispatchDeps {
  handlers: HandlerTable;
  activity: ActivityLog;
  forwarder: Forwarder;
  log: Logger;
}

export class Dispatch {
  constructor(private readonly deps: DispatchDeps) {}

  /** Throws 403 unless the caller holds every scope the operation names. */
  authorize(op: Operation, caller: Caller): void {
    if (op.scopes.every((s) => caller.scopes.includes(s))) return;
    const missing = op.scopes.filter((s) => !caller.scopes.includes(s));
    throw forbidden(`token '${caller.tokenName}' lacks scope ${missing.map((s) => `'${s}'`).join(' and ')} needed by ${op.name}`);
  }

  /**
   * Runs an operation for a caller. `args` are the assembled arguments (path
   * parameters included). Throws ApiError; the caller's transport renders it.
   */
  async call(opOrName: Operation | string, argsIn: Args | (() => Promise<Args>), caller: Caller, requestId: string): Promise<unknown> {
    const op = typeof opOrName === 'string' ? getOperation(opOrName) : opOrName;
    if (!op) throw notFound(`no operation named '${String(opOrName)}'`);
    let note: ActivityNote = {};
    let forwarded = false;
    let args: Args = {};
    try {
      this.authorize(op, caller);
      // A transport may hand over a loader so that reading and parsing the
      // request happen only after the scope check, and its failures are recorded.
      args = typeof argsIn === 'function' ? await argsIn() : argsIn;
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
            return await where.forward(op, rest, caller, requestId);
          }
        }
      }
      const ctx: CallContext = {
        caller,
        requestId,
        note: (n) => { note = { ...note, ...n, metadata: { ...note.metadata, ...n.metadata } }; },
        forwardTo: async (peerId) => {
          if (caller.transport === 'cluster') throw conflict(`${op.name} must run on ${peerId}, and a call forwarded once is not forwarded again; call ${peerId} directly`);
          const where = this.deps.forwarder.resolve(peerId);
          if (!where) throw notFound(`peer '${peerId}' not found`);
          if (where === 'self') throw conflict(`${op.name} was handed to this node itself`);
          forwarded = true;
          return where.forward(op, local, caller, requestId);
        },
      };
      // The arguments were validated against this operation's schema just above: they are its ArgsOf.
      const handler = this.deps.handlers[op.name as keyof HandlerTable] as Handler;
      const result = await handler(local, ctx);
      // A call the handler handed to a member is recorded there.
      if (!op.readOnly && !forwarded) await this.record(op, args, caller, requestId, note, undefined);
      return result;
    } catch (err) {
      // A forwarded call is recorded by the member that ran it; the origin
      // records only when the member could not be reached to run it (502).
      const status = errorBody(err).status;
      if (!op.readOnly && (!forwarded || status === 502)) {
        await this.record(op, args, caller, requestId, note, err).catch((e) => this.deps.log.error({ err: e }, 'activity write failed'));
      }
      throw err;
    }
  }

  /**
   * Records an operator event that is not an API call (hostctl over the admin
   * socket, cluster membership): the activity log has one writer, dispatch.
   */
  async audit(e: { category: ActivityCategory; severity: Severity; summary: string; target: string; actor: string; metadata: Record<string, unknown> & { transport: string } }): Promise<void> {
    await this.deps.activity.record(e);
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
    if (e) metadata.error = e.body.error;
    if (typeof args.peer_id === 'string' && e?.status === 502) metadata.peer_id = args.peer_id;
    await this.deps.activity.record({
      category: op.category,
      severity: failed ? 'warning' : 'info',
      summary: failed ? `${op.summary.replace(/\.$/, '')} failed: ${e!.body.error}` : note.summary ?? op.summary.replace(/\.$/, ''),
      target: note.target ?? targetLabel(op, args),
      actor: caller.tokenName,
      metadata,
    });
  }
}

/** A readable label from the path parameters, e.g. `vms/12` or `folders/f_ab/entries/a.txt`. */
function targetLabel(op: Operation, args: Args): string {
  return op.segments
    .map((s) => (s.startsWith('{') ? String(args[s.slice(1, -1)] ?? s) : s))
    .join('/');
}

