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
}

/** What a handler may say about its call for the activity row. */
export interface ActivityNote {
  summary?: string;
  target?: string;
  metadata?: Record<string, unknown>;
}

export interface CallContext {
  caller: Caller;
  requestId: string;
  /** Refines the activity row dispatch writes for a mutating call. */
  note(n: ActivityNote): void;
}

export type Args = Record<string, any>;
export type Handler = (args: Args, ctx: CallContext) => Promise<unknown>;
