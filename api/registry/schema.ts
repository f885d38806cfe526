/**
 * Small builders for argument and result schemas so that every registry file
 * states the spec's types, ranges and shapes the same way. Each builder's
 * result carries the TypeScript type of the values it accepts (a phantom
 * field), so the request type of every operation derives from its schema
 * (`ArgsOf`), and so does its answer (`ResultOf`).
 *
 * Sections: plain types; argument rules (addresses, names, ids, paths: one
 * rule each, the same 400 in every domain); the checks a schema cannot state;
 * result pieces (objects, and the shapes several answers share).
 */
import net from 'node:net';
import path from 'node:path';
import { badRequest } from '../../daemon/lib/errors.js';
import { ACTIVITY_CATEGORIES, SEVERITIES, type JsonSchema, type Schema, type ValueOf } from './types.js';

export const UINT32_MAX = 4294967295;

const withDesc = <T>(s: JsonSchema, description?: string): Schema<T> => (description ? { ...s, description } : s) as Schema<T>;

export const str = (description?: string, extra: JsonSchema = {}): Schema<string> => withDesc({ type: 'string', ...extra }, description);

export const int = (description?: string, min?: number, max?: number): Schema<number> => {
  const s: JsonSchema = { type: 'integer' };
  if (min !== undefined) s.minimum = min;
  if (max !== undefined) s.maximum = max;
  return withDesc(s, description);
};

/** Integer 0-4294967295, the spec's range for sizes, counts and timeouts. */
export const uint32 = (description?: string): Schema<number> => int(description, 0, UINT32_MAX);

export const bool = (description?: string): Schema<boolean> => withDesc({ type: 'boolean' }, description);

export const oneOf = <V extends string>(values: readonly V[], description?: string): Schema<V> => withDesc({ type: 'string', enum: [...values] }, description);

export const strArray = (description?: string): Schema<string[]> => withDesc({ type: 'array', items: { type: 'string' } }, description);

/** An array of items of one schema. */
export const arrayOf = <T>(items: Schema<T>, description?: string, extra: JsonSchema = {}): Schema<T[]> =>
  withDesc({ type: 'array', items, ...extra }, description);

/** An object whose values are strings (labels, environment, credentials). */
export const strMap = (description?: string): Schema<Record<string, string>> =>
  withDesc({ type: 'object', additionalProperties: { type: 'string' } }, description);

/** `X or null`: omitting it or sending null keeps the current value / applies the default. */
export const nullable = <T>(s: Schema<T>): Schema<T | null> => {
  const t = s.type;
  if (typeof t === 'string') return { ...s, type: [t, 'null'] } as Schema<T | null>;
  const out: JsonSchema = { anyOf: [s, { type: 'null' }] };
  for (const k of ['description', 'examples', 'x-expect'] as const) if (s[k] !== undefined) out[k] = k === 'x-expect' ? `${String(s[k])}, or null` : s[k];
  return out as Schema<T | null>;
};

export interface Target {
  kind: 'folder' | 'connection';
  id: string;
  path?: string;
}

export const target = (description = 'Folder or connected location to act on; overrides the folder id and sub-path pair.'): Schema<Target> =>
  ({
    type: 'object',
    description,
    properties: {
      kind: { type: 'string', enum: ['folder', 'connection'] },
      id: { type: 'string' },
      path: { type: 'string' },
    },
    required: ['kind', 'id'],
    additionalProperties: false,
  }) as Schema<Target>;

export interface FolderAssignment {
  folder_id: string;
  container_path: string;
  sub_path?: string;
  mount_point_id?: string;
  read_only?: boolean;
}

export const folderAssignment = (): Schema<FolderAssignment> =>
  ({
    type: 'object',
    properties: {
      folder_id: { type: 'string' },
      container_path: { type: 'string' },
      sub_path: { type: 'string' },
      mount_point_id: { type: 'string' },
      read_only: { type: 'boolean' },
    },
    required: ['folder_id', 'container_path'],
    additionalProperties: false,
  }) as Schema<FolderAssignment>;

export interface LxcMountPoint {
  host_path: string;
  container_path: string;
  read_only: boolean;
}

export const lxcMountPoint = (): Schema<LxcMountPoint> =>
  ({
    type: 'object',
    properties: {
      host_path: { type: 'string' },
      container_path: { type: 'string' },
      read_only: { type: 'boolean' },
    },
    required: ['host_path', 'container_path', 'read_only'],
    additionalProperties: false,
  }) as Schema<LxcMountPoint>;

export interface SandboxResources {
  cpu_cores?: number;
  memory_mb?: number;
  disk_gb?: number;
}

export const sandboxResources = (): Schema<SandboxResources> =>
  ({
    type: 'object',
    properties: {
      cpu_cores: uint32('CPU cores'),
      memory_mb: uint32('Memory in MiB'),
      disk_gb: uint32('Disk in GiB'),
    },
    additionalProperties: false,
  }) as Schema<SandboxResources>;

export interface MovePair {
  src_sub_path: string;
  dst_sub_path: string;
}

export const movePair = (): Schema<MovePair> =>
  ({
    type: 'object',
    properties: { src_sub_path: { type: 'string' }, dst_sub_path: { type: 'string' } },
    required: ['src_sub_path', 'dst_sub_path'],
    additionalProperties: false,
  }) as Schema<MovePair>;

/** Header overrides: keys must be RFC 7230 tokens. */
export const headerMap = (description?: string): Schema<Record<string, string>> =>
  withDesc(
    {
      type: 'object',
      propertyNames: { pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" },
      additionalProperties: { type: 'string' },
    },
    description,
  );

export const PEER_ID: Schema<string> = {
  type: 'string',
  minLength: 1,
  description: 'Paired server that runs the call; omit to run on the server called.',
} as Schema<string>;

/**
 * `one of these strings, or null`. `nullable(oneOf(...))` would reject null,
 * because the enum has to list null as well.
 */
export const nullableOneOf = <V extends string>(values: readonly V[], description?: string): Schema<V | null> =>
  withDesc({ type: ['string', 'null'], enum: [...values, null] }, description);

// ---------------------------------------------------------------------------
// Argument rules: one per kind of value, for every domain that takes one.
//
// Each rule is stated with standard keywords a client can check too (format,
// pattern, maxLength, not) and carries:
// - `x-expect`: what the value must be, in words; a 400 for it says
//   "argument '<name>' must be <x-expect>" (api/validate.ts);
// - `examples`: a valid value (loopback addresses, `.test` names), which the
//   conformance walk sends as the argument's sample.
// Patterns use no lookaround, so that validators in other languages run them.

const IPV4_SRC = '(?:(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)\\.){3}(?:25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const H16 = '[0-9A-Fa-f]{1,4}';
const LS32 = `(?:${H16}:${H16}|${IPV4_SRC})`;
/** Up to n+1 groups before a `::` (RFC 3986's `[ *n( h16 ":" ) h16 ]`). */
const head = (n: number) => `(?:(?:${H16}:){0,${n}}${H16})?`;
/** RFC 3986's IPv6address: the nine ways a `::` may shorten eight groups. No zone id. */
const IPV6_SRC =
  '(?:' +
  [
    `(?:${H16}:){6}${LS32}`,
    `::(?:${H16}:){5}${LS32}`,
    `${head(0)}::(?:${H16}:){4}${LS32}`,
    `${head(1)}::(?:${H16}:){3}${LS32}`,
    `${head(2)}::(?:${H16}:){2}${LS32}`,
    `${head(3)}::${H16}:${LS32}`,
    `${head(4)}::${LS32}`,
    `${head(5)}::${H16}`,
    `${head(6)}::`,
  ].join('|') +
  ')';
const V4_PREFIX = '(?:3[0-2]|[12]\\d|[1-9])';
const V6_PREFIX = '(?:12[0-8]|1[01]\\d|[1-9]\\d?)';
const DNS_LABEL_SRC = '[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?';
/** C0 and C1 control characters, DEL, and lone UTF-16 surrogates (with the `u` flag JSON Schema patterns run under). */
const CONTROL = '\\u0000-\\u001f\\u007f-\\u009f\\uD800-\\uDFFF';

export const PATTERNS = {
  ipv4: `^${IPV4_SRC}$`,
  ipv6: `^${IPV6_SRC}$`,
  cidr: `^(?:${IPV4_SRC}(?:/${V4_PREFIX})?|${IPV6_SRC}(?:/${V6_PREFIX})?)$`,
  dnsLabel: `^${DNS_LABEL_SRC}$`,
  imageId: '^[A-Za-z0-9](?:\\.?[A-Za-z0-9_-])*\\.?$',
  isoId: '^[A-Za-z0-9](?:\\.?[A-Za-z0-9_+-])*\\.?$',
  bridgeName: '^[A-Za-z0-9_.-]+$',
} as const;

/** A rule: `base` plus the words of its 400 and a valid example. */
const rule = <T>(base: JsonSchema, expect: string, example: T, description?: string): Schema<T> =>
  withDesc<T>({ ...base, 'x-expect': expect, examples: [example] }, description);

/** An IPv4 address in dotted quad, no leading zeros. */
export const ipv4 = (description?: string): Schema<string> =>
  rule({ type: 'string', format: 'ipv4', pattern: PATTERNS.ipv4 }, 'an IPv4 address', '127.0.0.1', description);

/** An IPv6 address (any RFC 4291 text form), without a zone id. */
export const ipv6 = (description?: string): Schema<string> =>
  rule({ type: 'string', format: 'ipv6', pattern: PATTERNS.ipv6 }, 'an IPv6 address', '::1', description);

/** An IPv4 or IPv6 address. */
export const ipAddress = (description?: string): Schema<string> =>
  rule(
    {
      type: 'string',
      anyOf: [
        { format: 'ipv4', pattern: PATTERNS.ipv4 },
        { format: 'ipv6', pattern: PATTERNS.ipv6 },
      ],
    },
    'an IPv4 or IPv6 address',
    '127.0.0.1',
    description,
  );

/**
 * An address with an optional prefix length (`192.168.1.10/24`, `fd00::10`):
 * 1-32 for IPv4, 1-128 for IPv6. Without one the service applies /24 or /64
 * (`withPrefix`).
 */
export const cidr = (description?: string): Schema<string> =>
  rule({ type: 'string', pattern: PATTERNS.cidr }, 'an IPv4 or IPv6 address with an optional /prefix (1-32 or 1-128)', '127.0.0.2/8', description);

/** Resolvers: at most 8 addresses. */
export const dnsServers = (description?: string): Schema<string[]> => withDesc({ type: 'array', items: ipAddress(), maxItems: 8 }, description);

/** One DNS label: letters, digits and inner hyphens, 1-63 characters (services store it lowercase). */
export const dnsLabel = (description?: string): Schema<string> =>
  rule({ type: 'string', pattern: PATTERNS.dnsLabel, maxLength: 63 }, 'one DNS label (letters, digits and inner hyphens, 1-63 characters)', 'www', description);

/** A DNS name of at least `minLabels` labels, at most 253 characters, no trailing dot (services store it lowercase). */
export const dnsName = (description?: string, opts: { minLabels?: number } = {}): Schema<string> => {
  const min = opts.minLabels ?? 1;
  const more = min <= 1 ? '*' : `{${min - 1},}`;
  const words = min <= 1 ? 'a DNS name' : `a DNS name of at least ${min} labels`;
  return rule(
    { type: 'string', pattern: `^${DNS_LABEL_SRC}(?:\\.${DNS_LABEL_SRC})${more}$`, maxLength: 253 },
    `${words} (letters, digits and inner hyphens, 1-63 characters per label, 253 in all)`,
    'example.test',
    description,
  );
};

/** An upstream or server: an IP address or a DNS name. */
export const hostOrIp = (description?: string): Schema<string> =>
  rule(
    {
      type: 'string',
      maxLength: 253,
      anyOf: [
        { format: 'ipv4', pattern: PATTERNS.ipv4 },
        { format: 'ipv6', pattern: PATTERNS.ipv6 },
        { pattern: `^${DNS_LABEL_SRC}(?:\\.${DNS_LABEL_SRC})*$` },
      ],
    },
    'an IP address or a DNS name',
    '127.0.0.1',
    description,
  );

/** Case-insensitive pattern text for a literal prefix (no `i` flag in JSON Schema). */
const anyCase = (lit: string) =>
  [...lit].map((c) => (/[a-z]/i.test(c) ? `[${c.toLowerCase()}${c.toUpperCase()}]` : c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('');

/**
 * The name of a VM, container, app or folder as users give it: 1-`max`
 * characters counted in code points (128 unless said), spaces and any script
 * allowed; no control character, '/' or '\\', no space at either end, not '.'
 * or '..', and not starting with `reservedPrefix` when one is given (the
 * names a runtime keeps for itself, e.g. LXC's `svc-lxc-`).
 */
export const resourceName = (description?: string, opts: { max?: number; reservedPrefix?: string } = {}): Schema<string> => {
  const max = opts.max ?? 128;
  const inner = `[^${CONTROL}/\\\\]`;
  const edge = `[^\\s${CONTROL}/\\\\]`;
  const not: JsonSchema[] = [{ not: { enum: ['.', '..'] } }];
  if (opts.reservedPrefix) not.push({ not: { pattern: `^${anyCase(opts.reservedPrefix)}` } });
  const words = `a name of 1-${max} characters without control characters, '/' or '\\', with no space at either end, not '.' or '..'${opts.reservedPrefix ? `, not starting with '${opts.reservedPrefix}'` : ''}`;
  return rule({ type: 'string', minLength: 1, maxLength: max, pattern: `^${edge}(?:${inner}*${edge})?$`, allOf: not }, words, 'example', description);
};

/** A VM, LXC or template image id: 1-64 of [A-Za-z0-9_.-], starting with a letter or digit, no '..'. */
export const imageId = (description?: string): Schema<string> =>
  rule(
    { type: 'string', maxLength: 64, pattern: PATTERNS.imageId },
    "1-64 of [A-Za-z0-9_.-], starting with a letter or digit, without '..'",
    'debian-12',
    description,
  );

/** An installer ISO id: 1-128 of [A-Za-z0-9_.+-], starting with a letter or digit, no '..'. */
export const isoId = (description?: string): Schema<string> =>
  rule(
    { type: 'string', maxLength: 128, pattern: PATTERNS.isoId },
    "1-128 of [A-Za-z0-9_.+-], starting with a letter or digit, without '..'",
    'debian-12.7.0-amd64-netinst.iso',
    description,
  );

/**
 * A mount point inside a container or app: absolute, at most 4096
 * characters, no control character, no ':' or ',' (they separate the fields of
 * a compose volume and an LXC mount entry), no '..' segment. That it is not
 * the root once normalised is `containerPath()`'s check.
 */
export const containerPath = (description?: string): Schema<string> => {
  const c = `[^/${CONTROL}:,]`;
  const n = `[^./${CONTROL}:,]`;
  // A segment: anything but '..' ('.' and '...' included; '.' is normalised away).
  const seg = `(?:${n}${c}*|\\.(?:${n}${c}*)?|\\.\\.${c}+)`;
  // Empty is refused by minLength, so a match starts with '/'.
  return rule(
    { type: 'string', minLength: 1, maxLength: 4096, pattern: `^(?:/+${seg})*/*$` },
    "an absolute path inside the container, without control characters, ':', ',' or '..' segments",
    '/data',
    description,
  );
};

/** A network interface name (a bridge): 1-15 of [A-Za-z0-9_.-], not '.' or '..'. */
export const bridgeName = (description?: string): Schema<string> =>
  rule(
    { type: 'string', minLength: 1, maxLength: 15, pattern: PATTERNS.bridgeName, not: { enum: ['.', '..'] } },
    "an interface name (1-15 of [A-Za-z0-9_.-], not '.' or '..')",
    'br0',
    description,
  );

/** `s`, or an empty string (the spec's "empty clears"). */
export const emptyOr = <T extends string>(s: Schema<T>): Schema<T | ''> => {
  const { description, examples, ...rest } = s;
  // The rule first: a reader that takes an anyOf's first alternative for the
  // argument's bounds (client generators, the conformance walk) sees the rule's.
  const out: JsonSchema = { anyOf: [rest, { type: 'string', maxLength: 0 }], 'x-expect': `${String(s['x-expect'] ?? 'a valid value')}, or empty` };
  if (examples) out.examples = examples;
  if (description) out.description = description;
  return out as Schema<T | ''>;
};

// ---------------------------------------------------------------------------
// Checks a schema cannot state: one named function each, used by every domain.

/** The address with its prefix length: the given one, else /24 (IPv4) or /64 (IPv6). Expects a value `cidr()` accepted. */
export function withPrefix(value: string): string {
  const [addr, prefix] = value.split('/');
  return `${addr}/${prefix ?? (net.isIP(addr) === 4 ? 24 : 64)}`;
}

/**
 * Why `gateway` cannot be the gateway of `address` (a value `cidr()`
 * accepted), or null: it must be of the same family and inside the subnet;
 * an IPv6 gateway may also be link-local (fe80::/10), as routers announce.
 */
export function gatewayProblem(gateway: string, address: string): string | null {
  const [addr, p] = withPrefix(address).split('/');
  const fam = net.isIP(addr);
  const gwFam = net.isIP(gateway);
  if (!gwFam) return 'is not an IP address';
  if (gwFam !== fam) return `is an IPv${gwFam} address and the address is IPv${fam}`;
  const type = fam === 4 ? 'ipv4' : 'ipv6';
  const inside = new net.BlockList();
  inside.addSubnet(addr, Number(p), type);
  if (type === 'ipv6') inside.addSubnet('fe80::', 10, 'ipv6');
  return inside.check(gateway, type) ? null : `is outside ${addr}/${p}${type === 'ipv6' ? ' (and not link-local)' : ''}`;
}

/** 400 unless `gateway` fits `address` (see gatewayProblem). */
export function checkGateway(gateway: string, address: string, arg = 'gateway'): string {
  const p = gatewayProblem(gateway, address);
  if (p) throw badRequest(`argument '${arg}' ${p}`);
  return gateway;
}

/** A value `containerPath()` accepted, normalised (`//a/./b/` is `/a/b`); 400 when it is the root. */
export function normalContainerPath(value: string, arg: string): string {
  const norm = path.posix.normalize(value).replace(/\/+$/, '');
  if (!norm) throw badRequest(`argument '${arg}' must not be the container's root`);
  return norm;
}

// ---------------------------------------------------------------------------
// Result pieces

type Flat<T> = { [K in keyof T]: T[K] } & {};
type ObjectOf<P extends Record<string, JsonSchema>, R extends keyof P> = Flat<
  { -readonly [K in R]: ValueOf<P[K]> } & { -readonly [K in Exclude<keyof P, R>]?: ValueOf<P[K]> }
>;

/**
 * An object with these properties, `required` ones always present. Closed
 * (`additionalProperties: false`) unless `open`: a result schema names every
 * field the answer has, and the conformance walk fails on one it does not.
 */
export const object = <P extends Record<string, JsonSchema>, R extends keyof P & string = never>(
  properties: P,
  required: readonly R[] = [],
  opts: { description?: string; title?: string; open?: boolean } = {},
): Schema<ObjectOf<P, R>> => {
  const s: JsonSchema = { type: 'object', properties, additionalProperties: opts.open ?? false };
  if (required.length) s.required = [...required];
  if (opts.title) s.title = opts.title;
  return withDesc(s, opts.description);
};

/** Any JSON object (a JSON Schema, free-form metadata). */
export const anyObject = (description?: string): Schema<Record<string, unknown>> => withDesc({ type: 'object' }, description);

/** Any JSON value. */
export const anyValue = (description?: string): Schema<unknown> => withDesc({}, description);

/** An RFC 3339 timestamp. */
export const dateTime = (description?: string): Schema<string> => withDesc({ type: 'string', format: 'date-time' }, description);

/** The body of every error answer (the spec's Errors section). */
export const errorBody = () => object({ error: str('What went wrong') }, ['error'], { title: 'Error' });

/** A background task as GET /tasks/{task_id} answers it (daemon/lib/tasks.ts TaskRecord). */
export const taskRecord = () =>
  object(
    {
      task_id: str('Task id'),
      kind: str('What the task does: <domain>.<resource>.<verb>'),
      title: str('What the task does, in words'),
      state: oneOf(['queued', 'running', 'succeeded', 'failed'] as const),
      progress: int('Percent done', 0, 100),
      node_id: str('Member that runs the task'),
      owner: str("Name of the token that started it, or 'admin' for the local administrator"),
      resource: str('The resource it acts on, e.g. vms/101'),
      target: str('Same as resource (kept for clients of the first release)'),
      created_at: dateTime(),
      started_at: nullable(dateTime()),
      finished_at: nullable(dateTime()),
      result: anyValue('What the work answered, once it succeeded'),
      error: nullable(str('Why it failed')),
      log_lines: int('Log lines so far', 0),
    },
    [
      'task_id',
      'kind',
      'title',
      'state',
      'progress',
      'node_id',
      'owner',
      'resource',
      'target',
      'created_at',
      'started_at',
      'finished_at',
      'result',
      'error',
      'log_lines',
    ],
    { title: 'TaskRecord' },
  );

/** A row of GET /activity. */
export const activityRow = () =>
  object(
    {
      id: str('Row id'),
      timestamp: dateTime(),
      category: oneOf(ACTIVITY_CATEGORIES),
      severity: oneOf(SEVERITIES),
      summary: str(),
      target: str(),
      actor: str('Name of the token that made the call'),
      metadata: object({ transport: str('api, mcp or cluster') }, ['transport'], { open: true }),
    },
    ['id', 'timestamp', 'category', 'severity', 'summary', 'target', 'actor', 'metadata'],
    { title: 'ActivityRow' },
  );
