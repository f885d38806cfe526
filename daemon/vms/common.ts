/** Paths, validation and small helpers shared by the VM service's parts. */
import crypto from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { badRequest, notFound } from '../lib/errors.js';
import { imageId, PATTERNS, resourceName } from '../../api/registry/schema.js';
import type { PoolConfig } from '../config.js';
import { USERNAME } from './settings.js';

/** Everything of the VM domain inside a pool lives under `<pool>/.vms/` (folders are the pool's other entries). */
export const poolVmsDir = (pool: PoolConfig) => path.join(pool.path, '.vms');
export const imagesDir = (pool: PoolConfig) => path.join(poolVmsDir(pool), 'images');
export const partialDir = (pool: PoolConfig) => path.join(imagesDir(pool), '.partial');
export const isosDir = (pool: PoolConfig) => path.join(poolVmsDir(pool), 'isos');
export const vmDir = (pool: PoolConfig, vmid: number) => path.join(poolVmsDir(pool), `vm-${vmid}`);
export const warmDir = (pool: PoolConfig, id: string) => path.join(poolVmsDir(pool), 'warm', id);

/** The registry's rules (api/registry/schema.ts), for values that arrive without a schema (hostctl's operator commands, catalog files). */
const IMAGE_ID = new RegExp(PATTERNS.imageId);
const ISO_ID = new RegExp(PATTERNS.isoId);
const NAME_RULE = resourceName();
const NAME = new RegExp(String(NAME_RULE.pattern), 'u');

export const isImageId = (id: string): boolean => id.length <= 64 && IMAGE_ID.test(id);
/** An ISO file name the pools' listing shows and a move takes: the ISO id rule, ending in .iso. */
export const isIsoFile = (id: string): boolean => id.length <= 128 && ISO_ID.test(id) && id.toLowerCase().endsWith('.iso');
export const WARM_ID = /^ws-[0-9a-f]{12}$/;

export function poolOf(pools: PoolConfig[], id: string, arg = 'storage_id'): PoolConfig {
  const p = pools.find((x) => x.id === id);
  if (!p) throw notFound(`storage pool '${id}' not found (argument '${arg}')`);
  return p;
}

export function checkImageId(id: string, arg = 'image_id'): string {
  if (!isImageId(id)) throw badRequest(`argument '${arg}' must be ${String(imageId()['x-expect'])}`);
  return id;
}

/** An image id from a free-form name (template names). */
export function slug(name: string): string {
  const s = name
    .toLowerCase()
    .replace(/[^a-z0-9_.-]+/g, '-')
    .replace(/^[^a-z0-9]+/, '')
    .replace(/-+$/, '')
    .slice(0, 64);
  return s.replace(/\.\.+/g, '.');
}

/** A name given to hostctl's operator commands, by the registry's resourceName rule. */
export function checkName(name: string, arg = 'name'): string {
  const n = [...name].length;
  if (n < 1 || n > 128 || !NAME.test(name) || name === '.' || name === '..') throw badRequest(`argument '${arg}' must be ${String(NAME_RULE['x-expect'])}`);
  return name;
}

/** The 400 for a value below an image's minimum: "argument 'memory_mb' (256) is below the minimum of image 'deb12' (512)". */
export const belowMinimum = (arg: string, value: number, imageId: string, min: string): string =>
  `argument '${arg}' (${value}) is below the minimum of image '${imageId}' (${min})`;

/** A DNS label for the guest from the VM name. */
export function hostnameOf(name: string, vmid: number): string {
  const h = name
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 63)
    .replace(/-+$/, '');
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
  if (t.length > 16384 || !KEY_TYPES.test(t) || BREAKS.test(t))
    throw badRequest(`argument '${arg}' must be one OpenSSH public key line (ssh-ed25519 AAAA... comment)`);
  return t;
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
