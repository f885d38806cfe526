/**
 * Daemon configuration: one YAML file, found as HOSTD_CONFIG names it, else
 * /etc/hostd/config.yaml when it exists, else none (defaults, data in ./data).
 * hostctl finds the daemon's data directory the same way. Environment
 * variables (HOSTD_HTTP_ADDR, HOSTD_DATA_DIR, ...) override single values for
 * development and tests; the systemd unit sets none of them, so the file
 * decides. Relative paths in the file are taken relative to the file.
 */
import { parseOrigin } from './lib/origin.js';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import YAML from 'yaml';

export interface PoolConfig {
  /** storage_id used by the API. */
  id: string;
  /** Absolute directory holding the pool's folders and images. */
  path: string;
  name?: string;
}

export interface HostAddr {
  host: string;
  port: number;
}

/** How the API's listener bounds connections and slow clients (config `http_limits`). */
export interface HttpLimits {
  /** Connections open at once, in total; beyond, new ones are dropped. */
  maxConnections: number;
  /** Connections open at once from one client address; beyond, new ones are closed. */
  maxConnectionsPerClient: number;
  /** Time for a request's headers to arrive. */
  headersTimeoutMs: number;
  /** Time for a request's body to arrive once it is read; then 408 and the connection closes. */
  bodyTimeoutMs: number;
  /** After an answer given before the body arrived, how long the rest is read and dropped before the socket closes. */
  closeLingerMs: number;
}

export const DEFAULT_HTTP_LIMITS: Readonly<HttpLimits> = Object.freeze({
  maxConnections: 1024,
  maxConnectionsPerClient: 128,
  headersTimeoutMs: 10_000,
  bodyTimeoutMs: 15_000,
  closeLingerMs: 2_000,
});

/** How long activity rows are kept (config `activity`; env HOSTD_ACTIVITY_*). */
export interface ActivityRetention {
  /** Rows older than this many days are deleted (0: no age limit). */
  maxAgeDays: number;
  /** The oldest rows beyond this many are deleted. */
  maxRows: number;
  /** How often the background pruning runs. */
  pruneEveryMs: number;
}

export const DEFAULT_ACTIVITY_RETENTION: Readonly<ActivityRetention> = Object.freeze({ maxAgeDays: 90, maxRows: 1_000_000, pruneEveryMs: 60_000 });

/** A section of numbers: each field's file key, its environment variable if any, its least value, and whether fractions are allowed. */
type NumberSection<T> = Record<keyof T, { key: string; env?: string; min: number; fraction?: boolean }>;

const HTTP_LIMIT_KEYS: NumberSection<HttpLimits> = {
  maxConnections: { key: 'max_connections', min: 1 },
  maxConnectionsPerClient: { key: 'max_connections_per_client', min: 1 },
  headersTimeoutMs: { key: 'headers_timeout_ms', min: 1 },
  bodyTimeoutMs: { key: 'body_timeout_ms', min: 1 },
  closeLingerMs: { key: 'close_linger_ms', min: 1 },
};

const ACTIVITY_KEYS: NumberSection<ActivityRetention> = {
  maxAgeDays: { key: 'max_age_days', env: 'HOSTD_ACTIVITY_MAX_AGE_DAYS', min: 0, fraction: true },
  maxRows: { key: 'max_rows', env: 'HOSTD_ACTIVITY_MAX_ROWS', min: 100 },
  pruneEveryMs: { key: 'prune_ms', env: 'HOSTD_ACTIVITY_PRUNE_MS', min: 10 },
};

/** Reads a section of numbers: unknown keys and values out of range stop the start, naming them. */
function parseNumbers<T extends object>(
  raw: unknown,
  section: string,
  spec: NumberSection<T>,
  defaults: Readonly<T>,
  where: string,
  env: NodeJS.ProcessEnv,
): T {
  const out = { ...defaults } as T;
  if (raw !== undefined && raw !== null && (typeof raw !== 'object' || Array.isArray(raw))) throw new Error(`${where}: ${section} must be a mapping`);
  const given = (raw ?? {}) as Record<string, unknown>;
  const known = Object.values(spec).map((f) => (f as { key: string }).key);
  for (const k of Object.keys(given)) if (!known.includes(k)) throw new Error(`${where}: ${section}.${k} is not a setting (known: ${known.join(', ')})`);
  for (const [field, f] of Object.entries(spec) as Array<[keyof T, NumberSection<T>[keyof T]]>) {
    const fromEnv = f.env ? env[f.env] : undefined;
    const v = fromEnv !== undefined && fromEnv !== '' ? Number(fromEnv) : given[f.key];
    if (v === undefined) continue;
    const what = fromEnv !== undefined && fromEnv !== '' ? f.env! : `${where}: ${section}.${f.key}`;
    if (typeof v !== 'number' || !Number.isFinite(v) || (!f.fraction && !Number.isInteger(v)) || v < f.min)
      throw new Error(`${what} must be a ${f.fraction ? '' : 'whole '}number >= ${f.min}`);
    (out as Record<keyof T, number>)[field] = v;
  }
  return out;
}

export interface Config {
  dataDir: string;
  http: HostAddr;
  cluster: HostAddr;
  /** Address peers use to reach this node (defaults to the cluster listen address). */
  clusterAdvertise?: string;
  nodeName: string;
  pools: PoolConfig[];
  logLevel: string;
  /** Connection caps and slow-client timeouts of the API listener (`http_limits`). */
  httpLimits?: HttpLimits;
  /** Retention of the activity log (`activity`). */
  activity?: ActivityRetention;
  /** Milliseconds a forwarded call may take before the origin answers 502. */
  forwardDeadlineMs: number;
  /** Milliseconds between health probes of the other members. */
  clusterProbeMs: number;
  /** Origins whose pages may call the API with a bearer token (`cors_origins`; none by default). */
  corsOrigins: string[];
  /**
   * The optional TLS listener (`https_addr` with `https_cert_file` and
   * `https_key_file`): the same API and console as `http_addr`, over HTTPS.
   */
  https?: HostAddr & { certFile: string; keyFile: string };
  /** The base URL `hostctl console` prints sign-in links for (`console_url`); default: the HTTP listener. */
  consoleUrl?: string;
  /** The config file read, if any. */
  configFile?: string;
  /** Where the listen addresses and the data dir came from, for error messages: an environment variable, a file key, or the default. */
  sources?: { http: string; cluster: string; dataDir: string };
  /**
   * The config file's other top-level sections by name (`vms:`, `lxc:`,
   * `apps:` ...): each domain reads and validates its own.
   */
  sections: Record<string, unknown>;
}

/** The local admin socket of a data dir (hostd listens on it, hostctl connects to it). */
export const socketPath = (dataDir: string): string => path.join(dataDir, 'hostd.sock');

export function parseAddr(value: string, what: string): HostAddr {
  const m = /^\[?([^\]]*?)\]?:(\d{1,5})$/.exec(value.trim());
  if (!m) throw new Error(`${what} must look like host:port, got '${value}'`);
  const port = Number(m[2]);
  if (port > 65535) throw new Error(`${what} port out of range: ${port}`);
  return { host: m[1] || '0.0.0.0', port };
}

/** Top-level keys of the config file that this module reads; every other key is a domain's section. */
const SPINE_KEYS = [
  'node_name',
  'data_dir',
  'http_addr',
  'cluster_addr',
  'cluster_advertise',
  'log_level',
  'forward_deadline_ms',
  'cluster_probe_ms',
  'storage_pools',
  'http_limits',
  'activity',
  'cors_origins',
  'https_addr',
  'https_cert_file',
  'https_key_file',
  'console_url',
];

interface FileConfig {
  node_name?: string;
  data_dir?: string;
  http_addr?: string;
  cluster_addr?: string;
  cluster_advertise?: string;
  log_level?: string;
  forward_deadline_ms?: number;
  cluster_probe_ms?: number;
  storage_pools?: Array<{ id?: string; path?: string; name?: string }>;
  http_limits?: unknown;
  activity?: unknown;
  cors_origins?: unknown;
  https_addr?: string;
  https_cert_file?: string;
  https_key_file?: string;
  console_url?: string;
}

/** The system-wide config file, read when HOSTD_CONFIG is not set. */
export const SYSTEM_CONFIG = '/etc/hostd/config.yaml';

/**
 * The config file to read: HOSTD_CONFIG when set (set but empty: none), else
 * `systemConfig` when it exists, else none.
 */
export function configFileOf(env: NodeJS.ProcessEnv, systemConfig = SYSTEM_CONFIG): string | undefined {
  if (env.HOSTD_CONFIG !== undefined) return env.HOSTD_CONFIG === '' ? undefined : path.resolve(env.HOSTD_CONFIG);
  return fs.existsSync(systemConfig) ? systemConfig : undefined;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, systemConfig = SYSTEM_CONFIG): Config {
  let file: FileConfig = {};
  let base = process.cwd();
  const configFile = configFileOf(env, systemConfig);
  if (configFile) {
    let text: string;
    try {
      text = fs.readFileSync(configFile, 'utf8');
    } catch (err) {
      throw new Error(`cannot read the config file ${configFile}: ${(err as Error).message}${env.HOSTD_CONFIG ? ' (named by HOSTD_CONFIG)' : ''}`);
    }
    let parsed: unknown;
    try {
      parsed = YAML.parse(text) ?? {};
    } catch (err) {
      throw new Error(`${configFile}: ${(err as Error).message}`);
    }
    if (typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error(`${configFile}: config must be a YAML mapping`);
    file = parsed as FileConfig;
    base = path.dirname(configFile);
  }
  const from = (envName: string, key: string, value: unknown) =>
    env[envName] !== undefined ? envName : value !== undefined ? `${key} in ${configFile}` : 'the default';
  const dataDir = path.resolve(env.HOSTD_DATA_DIR ?? (file.data_dir ? path.resolve(base, file.data_dir) : './data'));
  const pools: PoolConfig[] = [];
  for (const [i, p] of (file.storage_pools ?? []).entries()) {
    if (!p || typeof p.id !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(p.id)) throw new Error(`storage_pools[${i}].id must be 1-64 of [A-Za-z0-9_.-]`);
    if (typeof p.path !== 'string' || !p.path) throw new Error(`storage_pools[${i}].path is required`);
    if (pools.some((q) => q.id === p.id)) throw new Error(`storage_pools: duplicate id '${p.id}'`);
    pools.push({ id: p.id, path: path.resolve(base, p.path), name: p.name });
  }
  if (pools.length === 0) pools.push({ id: 'default', path: path.join(dataDir, 'pools', 'default'), name: 'Default pool' });
  const sources = {
    http: from('HOSTD_HTTP_ADDR', 'http_addr', file.http_addr),
    cluster: from('HOSTD_CLUSTER_ADDR', 'cluster_addr', file.cluster_addr),
    dataDir: from('HOSTD_DATA_DIR', 'data_dir', file.data_dir),
  };
  return {
    dataDir,
    configFile,
    sources,
    http: parseAddr(env.HOSTD_HTTP_ADDR ?? file.http_addr ?? '127.0.0.1:8787', sources.http === 'the default' ? 'http_addr' : sources.http),
    cluster: parseAddr(env.HOSTD_CLUSTER_ADDR ?? file.cluster_addr ?? '0.0.0.0:8788', sources.cluster === 'the default' ? 'cluster_addr' : sources.cluster),
    clusterAdvertise: env.HOSTD_CLUSTER_ADVERTISE ?? file.cluster_advertise,
    nodeName: env.HOSTD_NODE_NAME ?? file.node_name ?? os.hostname(),
    pools,
    logLevel: env.HOSTD_LOG_LEVEL ?? file.log_level ?? 'info',
    corsOrigins: corsOriginsOf(file.cors_origins, configFile ?? 'config'),
    https: httpsOf(file, base, configFile ?? 'config'),
    consoleUrl: file.console_url === undefined ? undefined : parseOrigin(file.console_url, `${configFile ?? 'config'}: console_url`),
    httpLimits: parseNumbers(file.http_limits, 'http_limits', HTTP_LIMIT_KEYS, DEFAULT_HTTP_LIMITS, configFile ?? 'config', env),
    activity: parseNumbers(file.activity, 'activity', ACTIVITY_KEYS, DEFAULT_ACTIVITY_RETENTION, configFile ?? 'config', env),
    forwardDeadlineMs: Number(env.HOSTD_FORWARD_DEADLINE_MS ?? file.forward_deadline_ms ?? 10000),
    clusterProbeMs: Number(env.HOSTD_CLUSTER_PROBE_MS ?? file.cluster_probe_ms ?? 2000),
    sections: Object.fromEntries(Object.entries(file).filter(([k]) => !SPINE_KEYS.includes(k))),
  };
}

function corsOriginsOf(value: unknown, file: string): string[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw new Error(`${file}: cors_origins must be a list of origins (https://dash.lab)`);
  return value.map((v, i) => parseOrigin(v, `${file}: cors_origins[${i}]`));
}

/** The TLS listener's settings: all three keys or none; the files are read at start. */
function httpsOf(file: FileConfig, base: string, where: string): Config['https'] {
  const { https_addr: addr, https_cert_file: cert, https_key_file: key } = file;
  if (addr === undefined && cert === undefined && key === undefined) return undefined;
  if (typeof addr !== 'string' || typeof cert !== 'string' || typeof key !== 'string' || !cert || !key) {
    throw new Error(`${where}: https_addr needs https_cert_file and https_key_file (PEM files), and they need it`);
  }
  return { ...parseAddr(addr, `${where}: https_addr`), certFile: path.resolve(base, cert), keyFile: path.resolve(base, key) };
}
