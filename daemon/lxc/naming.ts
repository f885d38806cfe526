/**
 * How the LXC domain names things: LXC's own name of a container
 * (`svc-lxc-<lxcid>`, hence the spec's ban on user names starting with it),
 * the hostname made from a user's name, the default image id of a template
 * capture, and the MAC of a new veth. Pure; the service and the LXC tools
 * both use these, so a name is made one way.
 */
import { PATTERNS } from '../../api/registry/schema.js';

/** The prefix of LXC's container names; user names may not start with it (the registry's `reservedPrefix`). */
export const LXC_NAME_PREFIX = 'svc-lxc-';

export const lxcNameOf = (lxcid: number): string => `${LXC_NAME_PREFIX}${lxcid}`;

/** A hostname from a free-form container name: lowercase letters, digits and '-', at most 63. */
export function hostnameOf(name: string, lxcid: number): string {
  const h = name
    .toLowerCase()
    .normalize('NFKD')
    .replace(/[^a-z0-9-]+/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 63)
    .replace(/-$/, '');
  return h || `ct${lxcid}`;
}

/** The registry's imageId() rule: 1-64 of [A-Za-z0-9_.-], a letter or digit first, no '..'. */
const IMAGE_ID = new RegExp(PATTERNS.imageId);
const IMAGE_ID_MAX = 64;

/** Whether `id` is an image id by the registry's rule (names found on disk are judged by it too). */
export const isImageId = (id: string): boolean => id.length <= IMAGE_ID_MAX && IMAGE_ID.test(id);

/** An image id from a container name (the default of a template capture). */
export function imageIdFromName(name: string, lxcid: number): string {
  const s = name
    .normalize('NFKD')
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/\.{2,}/g, '.')
    .replace(/-+/g, '-')
    .replace(/^[^A-Za-z0-9]+/, '')
    .slice(0, IMAGE_ID_MAX)
    .replace(/[-_]+$/, '');
  return isImageId(s) ? s : `lxc-${lxcid}`;
}

/** A MAC in the 00:16:3e prefix LXC itself uses for veths (three random bytes). */
export function randomHwaddr(bytes: Buffer): string {
  return ['00', '16', '3e', ...[...bytes.subarray(0, 3)].map((b) => b.toString(16).padStart(2, '0'))].join(':');
}
