/**
 * The spec's argument rules that a JSON Schema cannot state (or that the
 * service states again for a clear message): names, addresses, environment,
 * image ids, container paths. Pure; every error is a 400 naming the argument
 * and the rule, never the value.
 */
import net from 'node:net';
import { badRequest } from '../lib/errors.js';
import { BRIDGE_NAME } from './settings.js';

export const NAME_MAX = 128;
export const RESERVED_PREFIX = 'svc-lxc-';
const CONTROL = /[\u0000-\u001f\u007f]/u;
const LONE_SURROGATE = /[\uD800-\uDFFF]/u;

/**
 * A container name (create, clone, PATCH new_name): 1-128 characters; no '/',
 * '\', newline, NUL or other control character; not '.' or '..'; not starting
 * with the prefix of LXC's own names (`svc-lxc-`). Spaces and uppercase are fine.
 */
export function checkName(name: string, arg: string): string {
  if (name.length === 0) throw badRequest(`argument '${arg}' must not be empty`);
  if ([...name].length > NAME_MAX) throw badRequest(`argument '${arg}' must be at most ${NAME_MAX} characters`);
  if (name.includes('\0')) throw badRequest(`argument '${arg}' must not contain NUL bytes`);
  if (/[\n\r]/.test(name)) throw badRequest(`argument '${arg}' must not contain newlines`);
  if (CONTROL.test(name)) throw badRequest(`argument '${arg}' must not contain control characters`);
  if (LONE_SURROGATE.test(name.replace(/[\uD800-\uDBFF][\uDC00-\uDFFF]/g, ''))) throw badRequest(`argument '${arg}' must be valid Unicode text`);
  if (name.includes('/') || name.includes('\\')) throw badRequest(`argument '${arg}' must not contain slashes`);
  if (name === '.' || name === '..' || name.trim() === '.' || name.trim() === '..') throw badRequest(`argument '${arg}' must not be a path traversal ('.' or '..')`);
  if (name.toLowerCase().startsWith(RESERVED_PREFIX)) throw badRequest(`argument '${arg}' must not start with '${RESERVED_PREFIX}' (reserved for LXC's own container names)`);
  return name;
}

export const IMAGE_ID = /^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/;

export function checkImageId(id: string, arg = 'image_id'): string {
  if (!IMAGE_ID.test(id)) throw badRequest(`argument '${arg}' must be 1-128 of [A-Za-z0-9._-], starting with a letter or digit`);
  return id;
}

/** An image id from a container name (template capture default). */
export function imageIdFromName(name: string, lxcid: number): string {
  const s = name
    .normalize('NFKD')
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .replace(/-$/, '')
    .slice(0, 128);
  return IMAGE_ID.test(s) ? s : `lxc-${lxcid}`;
}

export function checkBridge(name: string, arg = 'network_bridge'): string {
  if (!BRIDGE_NAME.test(name)) throw badRequest(`argument '${arg}' must be an interface name (1-15 of [A-Za-z0-9_.-])`);
  return name;
}

/** `a.b.c.d[/p]` or an IPv6 address with an optional prefix; returns it with a prefix (/24 or /64 when none given). */
export function checkCidr(value: string, arg = 'ip_address'): string {
  const m = /^([^/]+)(?:\/(\d{1,3}))?$/.exec(value.trim());
  const fail = () => badRequest(`argument '${arg}' must be an IPv4 or IPv6 address with an optional /prefix`);
  if (!m) throw fail();
  const fam = net.isIP(m[1]);
  if (fam === 0) throw fail();
  const max = fam === 4 ? 32 : 128;
  const prefix = m[2] === undefined ? (fam === 4 ? 24 : 64) : Number(m[2]);
  if (prefix < 1 || prefix > max) throw badRequest(`argument '${arg}' has a prefix outside 1-${max}`);
  return `${m[1]}/${prefix}`;
}

export function checkIp(value: string, arg: string): string {
  if (net.isIP(value.trim()) === 0) throw badRequest(`argument '${arg}' must be an IPv4 or IPv6 address`);
  return value.trim();
}

function v4ToInt(ip: string): number {
  return ip.split('.').reduce((n, o) => n * 256 + Number(o), 0);
}

/** The gateway must be of the address's family and, for IPv4, inside its subnet (LXC refuses to start otherwise). */
export function checkGateway(gateway: string, cidr: string | null, arg = 'gateway'): string {
  const gw = checkIp(gateway, arg);
  if (!cidr) return gw;
  const [addr, p] = cidr.split('/');
  if (net.isIP(addr) !== net.isIP(gw)) throw badRequest(`argument '${arg}' must be of the same address family as ip_address`);
  if (net.isIP(addr) === 4) {
    const prefix = Number(p);
    const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
    if (((v4ToInt(addr) & mask) >>> 0) !== ((v4ToInt(gw) & mask) >>> 0)) throw badRequest(`argument '${arg}' must be inside the subnet of ip_address`);
  }
  return gw;
}

export function checkDns(list: string[], arg = 'dns_servers'): string[] {
  if (list.length > 8) throw badRequest(`argument '${arg}' takes at most 8 servers`);
  return list.map((s, i) => checkIp(s, `${arg}[${i}]`));
}

const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;

export function checkEnvironment(env: Record<string, string>, arg = 'environment'): Record<string, string> {
  const keys = Object.keys(env);
  if (keys.length > 256) throw badRequest(`argument '${arg}' takes at most 256 variables`);
  for (const k of keys) {
    if (!ENV_KEY.test(k)) throw badRequest(`argument '${arg}' has a variable name that is not [A-Za-z_][A-Za-z0-9_]*`);
    // One config line per variable: a line break would start a new LXC key.
    if (/[\n\r\0]/.test(env[k])) throw badRequest(`argument '${arg}' has a value with a newline or NUL byte`);
  }
  return { ...env };
}

/** An absolute path inside the container, normalised; never '/' itself and never with '..'. */
export function checkContainerPath(p: string, arg: string): string {
  if (!p.startsWith('/')) throw badRequest(`argument '${arg}' must be an absolute path inside the container`);
  if (CONTROL.test(p)) throw badRequest(`argument '${arg}' must not contain control characters`);
  if (p.length > 4096) throw badRequest(`argument '${arg}' must be at most 4096 characters`);
  const segs = p.split('/').filter((s) => s !== '' && s !== '.');
  if (segs.includes('..')) throw badRequest(`argument '${arg}' must not contain '..'`);
  if (segs.length === 0) throw badRequest(`argument '${arg}' must not be the container's root`);
  return '/' + segs.join('/');
}

/** A MAC in the 00:16:3e prefix LXC itself uses for veths (three random bytes). */
export function randomHwaddr(bytes: Buffer): string {
  return ['00', '16', '3e', ...[...bytes.subarray(0, 3)].map((b) => b.toString(16).padStart(2, '0'))].join(':');
}
