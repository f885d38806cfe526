/**
 * The checks of compose service keys that reach the host through the engine:
 * where logs go, kernel parameters, ports, resource limits and scheduling,
 * namespaces and networks. Each is a rule a careful operator would expect
 * Docker to apply to a stranger's compose file; docs/apps.md lists every
 * service key with its rule and why. Pure: the values only, no I/O.
 *
 * Messages name keys and the values that are not secrets (a driver, a sysctl,
 * an address); never an option value that could be a token.
 */
import net from 'node:net';
import { badRequest } from '../../lib/errors.js';

export type Check = (v: unknown, where: string) => unknown;

function isMapping(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function text(v: unknown, where: string): string {
  if (typeof v === 'number') return String(v);
  if (typeof v !== 'string') throw badRequest(`${where} must be a string`);
  return v;
}

/** `{k: v}` or `["k=v", ...]` (compose's two forms of a string map) as entries. */
function entries(v: unknown, where: string): Array<[string, unknown]> {
  if (isMapping(v)) return Object.entries(v);
  if (!Array.isArray(v)) throw badRequest(`${where} must be a mapping or a list of KEY=VALUE`);
  return v.map((e, i) => {
    const s = text(e, `${where}[${i}]`);
    const at = s.indexOf('=');
    return at < 0 ? [s, null] : [s.slice(0, at), s.slice(at + 1)];
  });
}

// ------------------------------------------------------------ logging

/**
 * Log drivers that keep the log on the engine's own disk. Every other driver
 * makes dockerd (root, in the host's namespaces) send the log somewhere the
 * caller names: a unix socket of the host (syslog, gelf, fluentd with
 * `unix://`), a network address, journald, a cloud service.
 */
const LOG_DRIVERS = ['json-file', 'local', 'none'];
/** Size and rotation: the only options those drivers take that keep the log where it is. */
const LOG_OPTIONS: Record<string, Record<string, { form: RegExp; what: string }>> = {
  'json-file': {
    'max-size': { form: /^[1-9]\d*[kmg]?$/i, what: 'a size such as 10m' },
    'max-file': { form: /^[1-9]\d*$/, what: 'a whole number of files' },
    compress: { form: /^(true|false)$/, what: 'true or false' },
  },
  local: {
    'max-size': { form: /^[1-9]\d*[kmg]?$/i, what: 'a size such as 10m' },
    'max-file': { form: /^[1-9]\d*$/, what: 'a whole number of files' },
    compress: { form: /^(true|false)$/, what: 'true or false' },
  },
  none: {},
};

export function logging(v: unknown, where: string): unknown {
  if (!isMapping(v)) throw badRequest(`${where} must be a mapping`);
  for (const k of Object.keys(v)) {
    if (k !== 'driver' && k !== 'options' && !k.startsWith('x-')) throw badRequest(`${where}: key '${k}' is not accepted (driver, options)`);
  }
  const driver = v.driver === undefined || v.driver === null ? null : text(v.driver, `${where}.driver`);
  if (driver !== null && !LOG_DRIVERS.includes(driver)) {
    throw badRequest(`${where}.driver is refused: '${driver}' sends the log outside the engine's own disk (accepted: ${LOG_DRIVERS.join(', ')})`);
  }
  if (v.options === undefined || v.options === null) return v;
  if (!isMapping(v.options)) throw badRequest(`${where}.options must be a mapping`);
  const keys = Object.keys(v.options);
  if (!keys.length) return v;
  // Without a driver the options go to the engine's default driver, which the app does not know.
  if (driver === null) throw badRequest(`${where}.options need ${where}.driver (json-file or local)`);
  const allowed = LOG_OPTIONS[driver];
  for (const k of keys) {
    const rule = allowed[k];
    if (!rule) {
      const names = Object.keys(allowed);
      throw badRequest(
        `${where}.options: option '${k}' is refused for log driver '${driver}' (${names.length ? `accepted: ${names.join(', ')}` : 'it takes no options'})`,
      );
    }
    const val = v.options[k];
    const s = typeof val === 'boolean' || typeof val === 'number' ? String(val) : val;
    if (typeof s !== 'string' || !rule.form.test(s)) throw badRequest(`${where}.options.${k} must be ${rule.what}`);
  }
  return v;
}

// ------------------------------------------------------------ sysctls

/**
 * Kernel parameters a container may set: those of the namespaces Docker gives
 * it (runc's list, as Docker documents it for `--sysctl`). Any other one is
 * the host's own kernel setting (`kernel.core_pattern` runs a program as root
 * on the host), which runc refuses late with an internal error.
 */
const IPC_SYSCTLS = new Set([
  'kernel.msgmax',
  'kernel.msgmnb',
  'kernel.msgmni',
  'kernel.sem',
  'kernel.shmall',
  'kernel.shmmax',
  'kernel.shmmni',
  'kernel.shm_rmid_forced',
]);
const SYSCTL_NAME = /^[a-z0-9_][a-z0-9_.\-/]*$/i;

export function sysctls(v: unknown, where: string): unknown {
  for (const [k, val] of entries(v, where)) {
    if (!SYSCTL_NAME.test(k) || k.includes('..') || k.includes('//') || k.endsWith('.') || k.endsWith('/')) {
      throw badRequest(`${where}: '${k.slice(0, 80)}' is not a sysctl name`);
    }
    const namespaced = IPC_SYSCTLS.has(k) || k.startsWith('fs.mqueue.') || k.startsWith('net.');
    if (!namespaced) {
      throw badRequest(
        `${where}: sysctl '${k}' is refused: it is not namespaced (it would set the host's kernel); accepted are net.*, fs.mqueue.*, ${[...IPC_SYSCTLS].join(', ')}`,
      );
    }
    if (val === null || val === undefined) throw badRequest(`${where}: sysctl '${k}' needs a value`);
    if (typeof val !== 'string' && typeof val !== 'number' && typeof val !== 'boolean')
      throw badRequest(`${where}: the value of sysctl '${k}' must be a string or a number`);
  }
  return v;
}

// ------------------------------------------------------------ namespaces and networks

const SERVICE_REF = /^service:[a-zA-Z0-9._-]+$/;

/**
 * `network_mode`: the app's own namespaces only. `host` and `container:` are
 * outside the app; `bridge` is Docker's default bridge, shared with every
 * container run by hand; any other name is an engine network, possibly another
 * app's (`hostd_<other>_app_default`).
 */
export function networkMode(v: unknown, where: string): unknown {
  const s = text(v, where);
  if (s === 'host') throw badRequest(`${where} is refused: 'network_mode: host' shares the host's network namespace`);
  if (s.startsWith('container:')) throw badRequest(`${where} is refused: '${s}' joins a container outside the app (use service:<name>)`);
  if (s === 'none' || SERVICE_REF.test(s)) return s;
  if (s === 'bridge' || s === 'default')
    throw badRequest(
      `${where} is refused: '${s}' joins Docker's default bridge, shared with containers outside the app (leave network_mode out: the app gets its own network)`,
    );
  throw badRequest(
    `${where} is refused: '${s.slice(0, 80)}' joins an engine network outside the app (accepted: none, service:<name>; declare the app's own networks under networks)`,
  );
}

/** ipc, pid, uts, cgroup: the values Docker takes that stay inside the app. */
export function namespaceMode(what: 'ipc' | 'pid' | 'uts' | 'cgroup'): Check {
  const own: Record<typeof what, string[]> = {
    ipc: ['', 'none', 'private', 'shareable'],
    pid: [''],
    uts: [''],
    cgroup: ['private'],
  };
  return (v, where) => {
    const s = text(v, where);
    if (s === 'host') throw badRequest(`${where} is refused: '${what}: host' shares the host's ${what} namespace`);
    if (s.startsWith('container:')) throw badRequest(`${where} is refused: '${s}' joins a container outside the app (use service:<name>)`);
    if (own[what].includes(s) || ((what === 'ipc' || what === 'pid') && SERVICE_REF.test(s))) return s;
    const accepted = [...own[what].filter(Boolean), ...(what === 'ipc' || what === 'pid' ? ['service:<name>'] : [])];
    throw badRequest(`${where}: '${s.slice(0, 80)}' is not accepted (${accepted.length ? `accepted: ${accepted.join(', ')}` : 'leave it out'})`);
  };
}

/** A service's `networks`: the app's own (compose checks they are declared); no endpoint driver options. */
export function serviceNetworks(v: unknown, where: string): unknown {
  if (Array.isArray(v)) {
    for (const [i, e] of v.entries()) text(e, `${where}[${i}]`);
    return v;
  }
  if (!isMapping(v)) throw badRequest(`${where} must be a list or a mapping`);
  const keys = ['aliases', 'ipv4_address', 'ipv6_address', 'link_local_ips', 'priority', 'gw_priority', 'mac_address', 'interface_name'];
  for (const [name, def] of Object.entries(v)) {
    if (def === null || def === undefined) continue;
    if (!isMapping(def)) throw badRequest(`${where}.${name} must be a mapping`);
    for (const k of Object.keys(def)) {
      if (k === 'driver_opts') throw badRequest(`${where}.${name}.driver_opts is refused: endpoint driver options act on the host's network setup`);
      if (!keys.includes(k) && !k.startsWith('x-')) throw badRequest(`${where}.${name}: key '${k}' is not accepted`);
    }
  }
  return v;
}

// ------------------------------------------------------------ ports

function isLoopback(ip: string): boolean {
  if (net.isIPv4(ip)) return ip.startsWith('127.');
  return ip === '::1';
}

function isWildcard(ip: string): boolean {
  return ip === '' || ip === '0.0.0.0' || ip === '::';
}

/** The host address of one `ports` entry, '' when it names none (then Docker binds every address). */
export function portHostIp(v: unknown, where: string): string {
  if (isMapping(v)) {
    if (v.host_ip === undefined || v.host_ip === null) return '';
    return text(v.host_ip, `${where}.host_ip`);
  }
  const s = text(v, where);
  // [HOST_IP:][HOST_PORT:]CONTAINER_PORT[/PROTOCOL]; an IPv6 address is in brackets.
  const bracket = /^\[([^\]]*)\]:/.exec(s);
  if (bracket) return bracket[1];
  const parts = s.split('/')[0].split(':');
  return parts.length === 3 ? parts[0] : '';
}

/**
 * Ports are published on loopback or on `apps.publish_address`; when that
 * setting is a wildcard (the default) any address is accepted. A port
 * without an address is bound on every host address.
 */
export function ports(publishAddress: string | undefined): Check {
  return (v, where) => {
    if (!Array.isArray(v)) throw badRequest(`${where} must be a list`);
    if (publishAddress === undefined || isWildcard(publishAddress)) return v;
    for (const [i, e] of v.entries()) {
      const w = `${where}[${i}]`;
      const ip = portHostIp(e, w);
      if (isLoopback(ip) || ip === publishAddress) continue;
      const bound = isWildcard(ip) ? 'every host address' : `host address '${ip}'`;
      throw badRequest(
        `${w} is refused: it publishes on ${bound}; apps publish on loopback or on apps.publish_address (${publishAddress}), e.g. '${publishAddress}:8080:80'`,
      );
    }
    return v;
  };
}

// ------------------------------------------------------------ resources and scheduling

/** Limits a container may set on itself; rtprio, rttime and nice let it run ahead of the host's own processes. */
const ULIMITS = ['core', 'cpu', 'data', 'fsize', 'locks', 'memlock', 'msgqueue', 'nofile', 'nproc', 'rss', 'stack', 'as', 'sigpending'];
const ULIMITS_REFUSED = ['rtprio', 'rttime', 'nice'];

export function ulimits(v: unknown, where: string): unknown {
  if (!isMapping(v)) throw badRequest(`${where} must be a mapping`);
  for (const [name, val] of Object.entries(v)) {
    if (ULIMITS_REFUSED.includes(name))
      throw badRequest(`${where}.${name} is refused: it lets the container's processes take scheduling priority over the host's`);
    if (!ULIMITS.includes(name)) throw badRequest(`${where}: '${name.slice(0, 40)}' is not a limit hostd accepts (${ULIMITS.join(', ')})`);
    const ok = (x: unknown) => (typeof x === 'number' && Number.isInteger(x) && x >= -1) || (typeof x === 'string' && /^-?\d+$/.test(x));
    if (isMapping(val)) {
      for (const k of Object.keys(val)) if (k !== 'soft' && k !== 'hard') throw badRequest(`${where}.${name}: key '${k}' is not accepted (soft, hard)`);
      if (!ok(val.soft) || !ok(val.hard)) throw badRequest(`${where}.${name} needs whole numbers soft and hard`);
    } else if (!ok(val)) {
      throw badRequest(`${where}.${name} must be a whole number or {soft, hard}`);
    }
  }
  return v;
}

/** Only a higher chance of being killed: a negative score makes the kernel kill host processes first. */
export function oomScoreAdj(v: unknown, where: string): unknown {
  const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v;
  if (typeof n !== 'number' || !Number.isInteger(n) || n < -1000 || n > 1000) throw badRequest(`${where} must be a whole number from 0 to 1000`);
  if (n < 0) throw badRequest(`${where} is refused: a negative score (${n}) makes the kernel kill the host's processes before the app's`);
  return v;
}

export function storageOpt(v: unknown, where: string): unknown {
  if (!isMapping(v)) throw badRequest(`${where} must be a mapping`);
  for (const k of Object.keys(v)) if (k !== 'size') throw badRequest(`${where}: option '${k.slice(0, 40)}' is refused (only size)`);
  return v;
}

export function cpuset(v: unknown, where: string): unknown {
  const s = text(v, where);
  if (!/^\d+(-\d+)?(,\d+(-\d+)?)*$/.test(s)) throw badRequest(`${where} must be a CPU list such as 0-2,4`);
  return v;
}

export function tmpfs(v: unknown, where: string): unknown {
  const list = typeof v === 'string' ? [v] : Array.isArray(v) ? v : null;
  if (!list) throw badRequest(`${where} must be a path or a list of paths`);
  for (const [i, e] of list.entries()) {
    const s = text(e, `${where}[${i}]`);
    if (!s.startsWith('/')) throw badRequest(`${where}[${i}]: '${s.slice(0, 80)}' must be an absolute path inside the container`);
  }
  return v;
}

export function isolation(v: unknown, where: string): unknown {
  if (text(v, where) !== 'default') throw badRequest(`${where}: only 'default' exists on Linux`);
  return v;
}

/**
 * `environment`: a name without a value is left unset. Compose would take it
 * from its own environment (hostd's engine address, PATH, HOME); hostd has
 * none to give the app. The renderer drops such names.
 */
export function environment(v: unknown, where: string): unknown {
  for (const [k] of entries(v, where)) {
    if (!/^[^=\s][^=]*$/.test(k)) throw badRequest(`${where}: '${k.slice(0, 40)}' is not a variable name`);
  }
  return v;
}
