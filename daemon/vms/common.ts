/** Paths, validation and small helpers shared by the VM service's parts. */
import crypto from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { badRequest, notFound } from '../lib/errors.js';
import type { PoolConfig } from '../config.js';
import { USERNAME } from './settings.js';

/** Everything of the VM domain inside a pool lives under `<pool>/.vms/` (folders are the pool's other entries). */
export const poolVmsDir = (pool: PoolConfig) => path.join(pool.path, '.vms');
export const imagesDir = (pool: PoolConfig) => path.join(poolVmsDir(pool), 'images');
export const partialDir = (pool: PoolConfig) => path.join(imagesDir(pool), '.partial');
export const isosDir = (pool: PoolConfig) => path.join(poolVmsDir(pool), 'isos');
export const vmDir = (pool: PoolConfig, vmid: number) => path.join(poolVmsDir(pool), `vm-${vmid}`);
export const warmDir = (pool: PoolConfig, id: string) => path.join(poolVmsDir(pool), 'warm', id);

export const IMAGE_ID = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;
export const ISO_ID = /^[A-Za-z0-9][A-Za-z0-9_.+-]{0,127}$/;
export const WARM_ID = /^ws-[0-9a-f]{12}$/;

export function poolOf(pools: PoolConfig[], id: string, arg = 'storage_id'): PoolConfig {
  const p = pools.find((x) => x.id === id);
  if (!p) throw notFound(`storage pool '${id}' not found (argument '${arg}')`);
  return p;
}

export function checkImageId(id: string, arg = 'image_id'): string {
  if (!IMAGE_ID.test(id) || id.includes('..')) throw badRequest(`argument '${arg}' must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit`);
  return id;
}

/** An image id from a free-form name (template names). */
export function slug(name: string): string {
  const s = name.toLowerCase().replace(/[^a-z0-9_.-]+/g, '-').replace(/^[^a-z0-9]+/, '').replace(/-+$/, '').slice(0, 64);
  return s.replace(/\.\.+/g, '.');
}

export function checkName(name: string, arg = 'name'): string {
  const n = name.trim();
  if (!n) throw badRequest(`argument '${arg}' must not be empty`);
  if (n.length > 128) throw badRequest(`argument '${arg}' must be at most 128 characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(n)) throw badRequest(`argument '${arg}' must not contain control characters`);
  return n;
}

/** A DNS label for the guest from the VM name. */
export function hostnameOf(name: string, vmid: number): string {
  const h = name.toLowerCase().replace(/[^a-z0-9-]+/g, '-').replace(/^-+|-+$/g, '').slice(0, 63).replace(/-+$/, '');
  return h || `vm-${vmid}`;
}

export function checkUsername(u: string, arg = 'username'): string {
  if (!USERNAME.test(u)) throw badRequest(`argument '${arg}' must be a Linux user name (lowercase letter or _, then up to 31 of [a-z0-9_-])`);
  if (['root', 'daemon', 'bin', 'sys', 'nobody'].includes(u)) throw badRequest(`argument '${arg}' must not be the system account '${u}'`);
  return u;
}

const KEY_TYPES = /^(ssh-(rsa|ed25519|dss)|ecdsa-sha2-nistp(256|384|521)|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) [A-Za-z0-9+/=]+( [^\r\n]*)?$/;

/**
 * Line breaks to YAML 1.1 (cloud-init's loader) or to sshd besides CR and LF:
 * NEL, LINE and PARAGRAPH SEPARATOR, and every other control character.
 */
// eslint-disable-next-line no-control-regex
const BREAKS = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/;

export function checkSshKey(k: string, arg = 'ssh_public_key'): string {
  const t = k.trim();
  if (t.length > 16384 || !KEY_TYPES.test(t) || BREAKS.test(t)) throw badRequest(`argument '${arg}' must be one OpenSSH public key line (ssh-ed25519 AAAA... comment)`);
  return t;
}

export function checkIp(v: string, arg: string): string {
  if (!net.isIP(v)) throw badRequest(`argument '${arg}' must be an IPv4 or IPv6 address, got '${v.slice(0, 64)}'`);
  return v;
}

/** `a.b.c.d[/n]` or IPv6 with optional prefix; the default prefix is /24 (IPv4) or /64. */
export function checkCidr(v: string, arg = 'ip_address'): string {
  const m = /^([^/]+)(?:\/(\d{1,3}))?$/.exec(v.trim());
  const fam = m ? net.isIP(m[1]) : 0;
  if (!m || !fam) throw badRequest(`argument '${arg}' must be an IP address with an optional /prefix, got '${v.slice(0, 64)}'`);
  const max = fam === 4 ? 32 : 128;
  const prefix = m[2] === undefined ? (fam === 4 ? 24 : 64) : Number(m[2]);
  if (prefix < 1 || prefix > max) throw badRequest(`argument '${arg}' has a prefix outside 1-${max}`);
  return `${m[1]}/${prefix}`;
}

export function checkDns(list: string[], arg = 'dns_servers'): string[] {
  if (list.length > 8) throw badRequest(`argument '${arg}' takes at most 8 servers`);
  return list.map((d, i) => checkIp(d.trim(), `${arg}[${i}]`));
}

export const newUuid = () => crypto.randomUUID();
export const randomHex = (bytes: number) => crypto.randomBytes(bytes).toString('hex');
export const now = () => new Date().toISOString();

/** A loopback TCP port that was free a moment ago. */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as net.AddressInfo).port;
      srv.close(() => resolve(port));
    });
  });
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
