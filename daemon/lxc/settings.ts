/**
 * The `lxc:` section of the config file, validated at open (a bad value stops
 * the daemon with a message naming the key, rather than failing a call later).
 *
 *   lxc:
 *     lxc_path: /var/lib/hostd/lxc         # LXC configs (default <data dir>/lxc)
 *     image_server: https://images.example/ # simplestreams base URL (streams/v1/index.json below it)
 *     default_bridge: br0                  # bridge for network_type bridged when none is named
 *     default_storage: fast                # pool for new rootfs (default: the first pool)
 *     image_storage: fast                  # pool downloads go to (default: the first pool)
 *     mount_roots: [/srv/media]            # host dirs mount_points may use, besides managed folders
 *                                          # (never at or above a pool root, in an internal dir, or overlapping the data dir or the lxc path)
 *     allow_privileged: false              # privileged containers (root on the host) may be created
 *     first_lxcid: 100                     # lowest id assigned automatically
 *     stop_timeout_seconds: 30             # clean shutdown wait before a hard stop
 *     default_cpu_cores: 1                 # when neither the request nor the image says
 *     default_memory_mb: 512
 *     idmap: { uid_start: 100000, gid_start: 100000, count: 65536 }  # default: root's range in /etc/subuid
 */
import fs from 'node:fs';
import path from 'node:path';
import { PATTERNS } from '../../api/registry/schema.js';
import type { Config } from '../config.js';
import { judgeHostPath } from '../lib/host-paths.js';

export interface IdRange {
  uid: number;
  gid: number;
  count: number;
}

export interface LxcSettings {
  lxcPath: string;
  imageServer: string | null;
  defaultBridge: string | null;
  defaultStorage: string;
  imageStorage: string;
  mountRoots: string[];
  /**
   * Whether privileged containers may be created, started and exec'd into.
   * A privileged container is root on the host (no id map; without an LSM
   * nothing else confines it), so only the operator turns this on.
   */
  allowPrivileged: boolean;
  firstLxcid: number;
  stopTimeoutSeconds: number;
  defaultCpuCores: number;
  defaultMemoryMb: number;
  /** null: read root's ranges from /etc/subuid and /etc/subgid when needed. */
  idmap: IdRange | null;
}

const KEYS = [
  'lxc_path',
  'image_server',
  'default_bridge',
  'default_storage',
  'image_storage',
  'mount_roots',
  'allow_privileged',
  'first_lxcid',
  'stop_timeout_seconds',
  'default_cpu_cores',
  'default_memory_mb',
  'idmap',
];

/** The registry's bridgeName() rule. */
const isBridgeName = (v: string) => v.length >= 1 && v.length <= 15 && new RegExp(PATTERNS.bridgeName).test(v) && v !== '.' && v !== '..';

/** The real path when it exists (the host-path rule judges real paths), else the path as given. */
function real(p: string): string {
  try {
    return fs.realpathSync(p);
  } catch {
    return path.resolve(p);
  }
}

/**
 * Why a mount root overlaps what hostd keeps for itself (a pool root or a
 * directory that holds one, an internal directory, the data dir or the LXC
 * path, at, above or below), or null: the same rule mount points are judged
 * by, applied to the root itself, so a root can never allow what the rule
 * refuses.
 */
function mountRootProblem(root: string, config: Pick<Config, 'dataDir' | 'pools'>, lxcPath: string): string | null {
  const r = real(root);
  const v = judgeHostPath(r, {
    allowed: [{ path: r, label: 'lxc.mount_roots' }],
    poolRoots: config.pools.map((p) => real(p.path)),
    private: [
      { path: real(config.dataDir), label: 'data directory' },
      { path: real(lxcPath), label: 'LXC path (lxc.lxc_path)' },
    ],
  });
  return v.ok ? null : v.reason;
}

function fail(msg: string): never {
  throw new Error(`config lxc.${msg}`);
}

function posInt(v: unknown, key: string, min: number, max: number): number {
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) fail(`${key} must be an integer ${min}-${max}`);
  return v;
}

export function parseSettings(raw: unknown, config: Pick<Config, 'dataDir' | 'pools'>): LxcSettings {
  const s = (raw ?? {}) as Record<string, unknown>;
  if (typeof s !== 'object' || Array.isArray(s)) fail(': the lxc section must be a mapping');
  for (const k of Object.keys(s)) if (!KEYS.includes(k)) fail(`${k} is not a known key (known: ${KEYS.join(', ')})`);
  const poolIds = config.pools.map((p) => p.id);
  const pool = (key: string): string => {
    const v = s[key];
    if (v === undefined || v === null) return poolIds[0];
    if (typeof v !== 'string' || !poolIds.includes(v)) fail(`${key} must name a storage pool (${poolIds.join(', ')})`);
    return v;
  };
  let lxcPath = path.join(config.dataDir, 'lxc');
  if (s.lxc_path !== undefined) {
    if (typeof s.lxc_path !== 'string' || !path.isAbsolute(s.lxc_path)) fail('lxc_path must be an absolute path');
    lxcPath = path.resolve(s.lxc_path);
  }
  let imageServer: string | null = null;
  if (s.image_server !== undefined && s.image_server !== null && s.image_server !== '') {
    if (typeof s.image_server !== 'string') fail('image_server must be a URL');
    let u: URL;
    try {
      u = new URL(s.image_server);
    } catch {
      fail('image_server must be an http or https URL');
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') fail('image_server must be an http or https URL');
    imageServer = u.toString().endsWith('/') ? u.toString() : u.toString() + '/';
  }
  let defaultBridge: string | null = null;
  if (s.default_bridge !== undefined && s.default_bridge !== null && s.default_bridge !== '') {
    if (typeof s.default_bridge !== 'string' || !isBridgeName(s.default_bridge))
      fail("default_bridge must be an interface name (1-15 of [A-Za-z0-9_.-], not '.' or '..')");
    defaultBridge = s.default_bridge;
  }
  const mountRoots: string[] = [];
  if (s.mount_roots !== undefined && s.mount_roots !== null) {
    if (!Array.isArray(s.mount_roots)) fail('mount_roots must be a list of absolute paths');
    for (const r of s.mount_roots) {
      if (typeof r !== 'string' || !path.isAbsolute(r)) fail('mount_roots must be a list of absolute paths');
      if (path.resolve(r) === '/') fail('mount_roots must not contain / (that would allow every host path)');
      const why = mountRootProblem(r, config, lxcPath);
      if (why) fail(`mount_roots entry ${r} ${why}; a mount root may hold only what containers may mount`);
      mountRoots.push(path.resolve(r));
    }
  }
  if (s.allow_privileged !== undefined && s.allow_privileged !== null && typeof s.allow_privileged !== 'boolean')
    fail('allow_privileged must be true or false');
  let idmap: IdRange | null = null;
  if (s.idmap !== undefined && s.idmap !== null) {
    const m = s.idmap as Record<string, unknown>;
    if (typeof m !== 'object' || Array.isArray(m)) fail('idmap must be a mapping with uid_start, gid_start, count');
    const count = posInt(m.count ?? 65536, 'idmap.count', 65536, 1 << 30);
    idmap = { uid: posInt(m.uid_start, 'idmap.uid_start', 1, 2 ** 32 - 1 - count), gid: posInt(m.gid_start, 'idmap.gid_start', 1, 2 ** 32 - 1 - count), count };
  }
  return {
    lxcPath,
    imageServer,
    defaultBridge,
    defaultStorage: pool('default_storage'),
    imageStorage: pool('image_storage'),
    mountRoots,
    allowPrivileged: s.allow_privileged === true,
    firstLxcid: s.first_lxcid === undefined ? 100 : posInt(s.first_lxcid, 'first_lxcid', 1, 999_999_999),
    stopTimeoutSeconds: s.stop_timeout_seconds === undefined ? 30 : posInt(s.stop_timeout_seconds, 'stop_timeout_seconds', 0, 3600),
    defaultCpuCores: s.default_cpu_cores === undefined ? 1 : posInt(s.default_cpu_cores, 'default_cpu_cores', 1, 4096),
    defaultMemoryMb: s.default_memory_mb === undefined ? 512 : posInt(s.default_memory_mb, 'default_memory_mb', 16, 16 * 1024 * 1024),
    idmap,
  };
}
