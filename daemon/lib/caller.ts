/**
 * Who is calling and how: built by a transport (HTTP/MCP from the bearer
 * token, gRPC from the forwarding member) and handed to every handler.
 */
export type Transport = 'api' | 'mcp' | 'cluster';

export interface Caller {
  tokenId: string;
  tokenName: string;
  scopes: string[];
  transport: Transport;
  /** Node id where the call entered the cluster (this node unless forwarded). */
  origin: string;
  /** The web console made the call (its activity row says `client: "console"`). */
  client?: 'console';
}

/**
 * The token id of the local administrator's calls (admin socket, console
 * administrator session). No token has it: token ids are `tok_<hex>`.
 */
export const ADMIN_TOKEN_ID = 'admin';

/**
 * Whether the caller is this node's local administrator. A call forwarded by
 * another member never is: a member's administrator is not this one's, and
 * the mesh carries no administrator claim (docs/console.md, "Members").
 */
export function isAdministrator(caller: Caller): boolean {
  return caller.tokenId === ADMIN_TOKEN_ID && caller.transport !== 'cluster';
}

/** What a handler may say about its call for the activity row. */
export interface ActivityNote {
  summary?: string;
  target?: string;
  metadata?: Record<string, unknown>;
}

/** Where a service reports what its call did, for the activity row dispatch writes. */
export interface NoteSink {
  note(n: ActivityNote): void;
  /**
   * Set by dispatch for a mutating call it will write the row of: that row is
   * written synced after the handler returns or throws, before the call
   * answers, unless the handler hands the call to another member
   * (`forwardTo`). A write that must only be on disk by the answer may then
   * be LAZY: the row's fsync takes every earlier write of the store's log
   * with it (docs/durability.md), and the call pays one fsync, not two.
   */
  readonly rowSyncs?: boolean;
}

export interface CallContext extends NoteSink {
  caller: Caller;
  requestId: string;
  /**
   * Hands this very call (same operation and arguments) to another member, as
   * if the caller had named it with peer_id: the member runs it and records it.
   * For operations that must run where a resource lives (the proxy holder).
   * Absent outside dispatch; refused for a call that already came over the cluster.
   */
  forwardTo?(peerId: string): Promise<unknown>;
}

/** A sink that drops notes (service calls made outside a request). */
export const noNotes: NoteSink = { note() {} };

export type Args = Record<string, any>;
/**
 * One operation's handler; `A` is its argument type and `R` what it answers,
 * both derived from the registry (`ArgsOf`, `ResultOf`): an operation with a
 * result schema has a handler whose return type is checked against it.
 */
export type Handler<A = Args, R = unknown> = (args: A, ctx: CallContext) => Promise<R>;
