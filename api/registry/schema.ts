/**
 * Small builders for argument schemas so that every registry file states the
 * spec's types, ranges and shapes the same way. Each builder's result carries
 * the TypeScript type of the values it accepts (a phantom field), so the
 * request type of every operation derives from its schema (`ArgsOf`).
 */
import type { JsonSchema, Schema } from './types.js';

export const UINT32_MAX = 4294967295;

const withDesc = <T>(s: JsonSchema, description?: string): Schema<T> =>
  (description ? { ...s, description } : s) as Schema<T>;

export const str = (description?: string, extra: JsonSchema = {}): Schema<string> =>
  withDesc({ type: 'string', ...extra }, description);

export const int = (description?: string, min?: number, max?: number): Schema<number> => {
  const s: JsonSchema = { type: 'integer' };
  if (min !== undefined) s.minimum = min;
  if (max !== undefined) s.maximum = max;
  return withDesc(s, description);
};

/** Integer 0-4294967295, the spec's range for sizes, counts and timeouts. */
export const uint32 = (description?: string): Schema<number> => int(description, 0, UINT32_MAX);

export const bool = (description?: string): Schema<boolean> => withDesc({ type: 'boolean' }, description);

export const oneOf = <V extends string>(values: readonly V[], description?: string): Schema<V> =>
  withDesc({ type: 'string', enum: [...values] }, description);

export const strArray = (description?: string): Schema<string[]> =>
  withDesc({ type: 'array', items: { type: 'string' } }, description);

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
  return { anyOf: [s, { type: 'null' }], ...(s.description ? { description: s.description } : {}) } as Schema<T | null>;
};

export interface Target {
  kind: 'folder' | 'connection';
  id: string;
  path?: string;
}

export const target = (description = 'Folder or connected location to act on; overrides the folder id and sub-path pair.'): Schema<Target> => ({
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

export const folderAssignment = (): Schema<FolderAssignment> => ({
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

export const lxcMountPoint = (): Schema<LxcMountPoint> => ({
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

export const sandboxResources = (): Schema<SandboxResources> => ({
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

export const movePair = (): Schema<MovePair> => ({
  type: 'object',
  properties: { src_sub_path: { type: 'string' }, dst_sub_path: { type: 'string' } },
  required: ['src_sub_path', 'dst_sub_path'],
  additionalProperties: false,
}) as Schema<MovePair>;

/** Header overrides: keys must be RFC 7230 tokens. */
export const headerMap = (description?: string): Schema<Record<string, string>> =>
  withDesc({
    type: 'object',
    propertyNames: { pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" },
    additionalProperties: { type: 'string' },
  }, description);

export const PEER_ID: Schema<string> = { type: 'string', minLength: 1, description: 'Paired server that runs the call; omit to run on the server called.' } as Schema<string>;

/**
 * `one of these strings, or null`. `nullable(oneOf(...))` would reject null,
 * because the enum has to list null as well.
 */
export const nullableOneOf = <V extends string>(values: readonly V[], description?: string): Schema<V | null> =>
  withDesc({ type: ['string', 'null'], enum: [...values, null] }, description);
