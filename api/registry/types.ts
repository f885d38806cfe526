/**
 * The shape of one operation in the registry. Every transport, the catalog,
 * OpenAPI, MCP tools, the CLI and the conformance tests derive from these.
 */
export type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
export type Hint = 'RO' | 'DEL' | 'IDEM';

export const ACTIVITY_CATEGORIES = ['auth', 'user', 'share', 'file', 'storage', 'backup', 'app', 'update', 'license', 'system', 'agent'] as const;
export type ActivityCategory = (typeof ACTIVITY_CATEGORIES)[number];

export const SEVERITIES = ['info', 'warning', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];

/** A row of `GET /activity` (written by dispatch, one per mutating call). */
export interface ActivityRow {
  id: string;
  timestamp: string;
  category: ActivityCategory;
  severity: Severity;
  summary: string;
  target: string;
  actor: string;
  metadata: Record<string, unknown> & { transport: string };
}

export type NewActivity = Omit<ActivityRow, 'id' | 'timestamp'> & { timestamp?: string };

/** Domains as the registry groups them (one registry file each); task kinds start with one. */
export const DOMAINS = [
  'catalog',
  'vms',
  'templates',
  'tasks',
  'system',
  'apps',
  'lxc',
  'folders',
  'locations',
  'proxy',
  'sandboxes',
  'metrics',
  'events',
  'tokens',
] as const;
export type Domain = (typeof DOMAINS)[number];

export type JsonSchema = { [key: string]: unknown };

declare const VALUE_TYPE: unique symbol;
/** A JSON Schema that remembers the TypeScript type of the values it accepts (never present at run time). */
export type Schema<T> = JsonSchema & { readonly [VALUE_TYPE]?: T };
/** The value type a schema accepts; `unknown` for a plain JsonSchema. */
export type ValueOf<S> = S extends { readonly [VALUE_TYPE]?: infer T } ? (unknown extends T ? unknown : T) : unknown;

/**
 * How an operation treats `peer_id`:
 * - 'forward' (default): optional; names the member that runs the call.
 * - 'none': the operation takes no peer_id (GET /peers).
 * - 'own': peer_id is an ordinary argument with the operation's own meaning (POST /proxy/move).
 */
export type PeerIdMode = 'forward' | 'none' | 'own';

export interface OperationSpec {
  /** Operation name, also the MCP tool name: `<domain>_<verb>` in snake case, e.g. `vms_create`. */
  name: string;
  domain: Domain;
  method: Method;
  /** Path relative to /api/v1, with `{param}` placeholders, e.g. `/vms/{id}/start`. */
  path: string;
  /** Every listed scope is required. Empty means any valid token. */
  scopes: readonly string[];
  /**
   * Only the local administrator may call it (admin socket, console
   * administrator session): every bearer token is refused with 403, whatever
   * its scopes, and so is a call forwarded from another member.
   */
  admin?: boolean;
  /** The operation makes new resources though its name is not `*_create` (a fork): its success is 201. */
  creates?: boolean;
  hints: readonly Hint[];
  summary: string;
  /** Activity category written for this operation's mutating calls. */
  category: ActivityCategory;
  /** Schemas of the path parameters, by name (always required). */
  params: Record<string, JsonSchema>;
  /** Schemas of the body/query arguments (peer_id excluded; it is added by the registry). */
  args: Record<string, JsonSchema>;
  /** Names of required body/query arguments. */
  required?: readonly string[];
  peerId?: PeerIdMode;
  /**
   * Schema of the success answer (a JSON object: `type: 'object'` at the
   * root, as MCP's outputSchema requires). When present: the handler's
   * return type is checked against it (`ResultOf`), OpenAPI and the MCP tool
   * publish it, and the conformance walk validates every success answer.
   */
  result?: JsonSchema;
  /**
   * The success answer is text in one of these media types, not JSON (the
   * Prometheus exposition): the handler answers `{content_type, text}`, the
   * HTTP transport sends `text` as is with that type, OpenAPI names the
   * types. Such an operation is not an MCP tool.
   */
  textResult?: readonly string[];
  /**
   * false: not offered as an MCP tool (a long-lived stream, which a tool call
   * cannot carry; a text answer). Default: true unless `textResult`.
   */
  mcp?: boolean;
}

/** An operation with everything derived from its spec filled in. */
export interface Operation extends Omit<OperationSpec, 'result' | 'mcp' | 'admin'> {
  peerId: PeerIdMode;
  /** Only the local administrator may call it (OperationSpec.admin). */
  admin: boolean;
  /** Offered as an MCP tool. */
  mcp: boolean;
  readOnly: boolean;
  destructive: boolean;
  idempotent: boolean;
  /** Full JSON Schema of the arguments: path params, body/query args, and peer_id where accepted. */
  schema: JsonSchema;
  /** Path split into segments; `{x}` segments are parameters. */
  segments: string[];
  /** HTTP status of a successful call: 201 for POSTs that create, 200 otherwise. */
  successStatus: 200 | 201;
  /** The result schema, or null while the operation has none. */
  result: JsonSchema | null;
}
