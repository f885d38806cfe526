/**
 * Small builders for argument schemas so that every registry file states the
 * spec's types, ranges and shapes the same way.
 */
import type { JsonSchema } from './types.js';

export const UINT32_MAX = 4294967295;

const withDesc = (s: JsonSchema, description?: string): JsonSchema =>
  description ? { ...s, description } : s;

export const str = (description?: string, extra: JsonSchema = {}): JsonSchema =>
  withDesc({ type: 'string', ...extra }, description);

export const int = (description?: string, min?: number, max?: number): JsonSchema => {
  const s: JsonSchema = { type: 'integer' };
  if (min !== undefined) s.minimum = min;
  if (max !== undefined) s.maximum = max;
  return withDesc(s, description);
};

/** Integer 0-4294967295, the spec's range for sizes, counts and timeouts. */
export const uint32 = (description?: string): JsonSchema => int(description, 0, UINT32_MAX);

export const bool = (description?: string): JsonSchema => withDesc({ type: 'boolean' }, description);

export const oneOf = (values: string[], description?: string): JsonSchema =>
  withDesc({ type: 'string', enum: values }, description);

export const strArray = (description?: string): JsonSchema =>
  withDesc({ type: 'array', items: { type: 'string' } }, description);

/** An object whose values are strings (labels, environment, credentials). */
export const strMap = (description?: string): JsonSchema =>
  withDesc({ type: 'object', additionalProperties: { type: 'string' } }, description);

/** `X or null`: omitting it or sending null keeps the current value / applies the default. */
export const nullable = (s: JsonSchema): JsonSchema => {
  const t = s.type;
  if (typeof t === 'string') return { ...s, type: [t, 'null'] };
  return { anyOf: [s, { type: 'null' }], ...(s.description ? { description: s.description } : {}) };
};

export const target = (description = 'Folder or connected location to act on; overrides the folder id and sub-path pair.'): JsonSchema => ({
  type: 'object',
  description,
  properties: {
    kind: { type: 'string', enum: ['folder', 'connection'] },
    id: { type: 'string' },
    path: { type: 'string' },
  },
  required: ['kind', 'id'],
  additionalProperties: false,
});

export const folderAssignment = (): JsonSchema => ({
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
});

export const lxcMountPoint = (): JsonSchema => ({
  type: 'object',
  properties: {
    host_path: { type: 'string' },
    container_path: { type: 'string' },
    read_only: { type: 'boolean' },
  },
  required: ['host_path', 'container_path', 'read_only'],
  additionalProperties: false,
});

export const sandboxResources = (): JsonSchema => ({
  type: 'object',
  properties: {
    cpu_cores: uint32('CPU cores'),
    memory_mb: uint32('Memory in MiB'),
    disk_gb: uint32('Disk in GiB'),
  },
  additionalProperties: false,
});

export const movePair = (): JsonSchema => ({
  type: 'object',
  properties: { src_sub_path: { type: 'string' }, dst_sub_path: { type: 'string' } },
  required: ['src_sub_path', 'dst_sub_path'],
  additionalProperties: false,
});

/** Header overrides: keys must be RFC 7230 tokens. */
export const headerMap = (description?: string): JsonSchema =>
  withDesc({
    type: 'object',
    propertyNames: { pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" },
    additionalProperties: { type: 'string' },
  }, description);

export const PEER_ID: JsonSchema = { type: 'string', description: 'Paired server that runs the call; omit to run on the server called.' };

/**
 * `one of these strings, or null`. `nullable(oneOf(...))` would reject null,
 * because the enum has to list null as well.
 */
export const nullableOneOf = (values: readonly string[], description?: string): JsonSchema =>
  withDesc({ type: ['string', 'null'], enum: [...values, null] }, description);
