/**
 * Reading a simplestreams image index, the format public LXC/LXD image
 * servers publish: `streams/v1/index.json` names product files (datatype
 * `image-downloads`, format `products:1.0`); each product has versions, each
 * version has items (files) with `ftype`, `path`, `sha256` and `size`. hostd
 * uses the rootfs tarball item (`root.tar.xz` and kin). Pure functions.
 */

import type { CatalogEntry } from '../driver.js';
import { isImageId } from '../naming.js';

type StreamFile = CatalogEntry['file'];

/** Rootfs tarball item types, best first. */
export const ROOTFS_FTYPES = ['root.tar.xz', 'rootfs.tar.xz', 'root.tar.zst', 'rootfs.tar.zst', 'root.tar.gz', 'rootfs.tar.gz', 'root.tar', 'rootfs.tar'];

export class StreamFormatError extends Error {}

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | null => (typeof v === 'string' && v ? v : null);

/** The product files an index names for image downloads (relative paths). */
export function productPaths(index: unknown): string[] {
  if (!isObj(index) || !isObj(index.index)) throw new StreamFormatError("index.json has no 'index' object");
  const out: string[] = [];
  for (const entry of Object.values(index.index)) {
    if (!isObj(entry)) continue;
    if (entry.datatype !== undefined && entry.datatype !== 'image-downloads') continue;
    if (entry.format !== undefined && entry.format !== 'products:1.0') continue;
    const p = str(entry.path);
    if (p) out.push(p);
  }
  if (out.length === 0) throw new StreamFormatError('index.json names no image-downloads product file');
  return out;
}

/**
 * The image id hostd uses for a product: its key with every run of
 * characters outside [A-Za-z0-9._-] made '-' (and of dots made one dot);
 * empty when that is not an image id (longer than 64): such a product is left
 * out of the catalog.
 */
export function imageIdOf(product: string): string {
  const id = product
    .replace(/[^A-Za-z0-9._-]+/g, '-')
    .replace(/\.{2,}/g, '.')
    .replace(/^[^A-Za-z0-9]+/, '');
  return isImageId(id) ? id : '';
}

/** Node's process.arch as image servers name it. */
export function streamArch(nodeArch: string): string {
  return (
    ({ x64: 'amd64', arm64: 'arm64', arm: 'armhf', ia32: 'i386', ppc64: 'ppc64el', s390x: 's390x', riscv64: 'riscv64' } as Record<string, string>)[nodeArch] ??
    nodeArch
  );
}

/**
 * Catalog entries of a products file: for each product of `arch` (or with no
 * arch), its newest version that has a rootfs tarball.
 */
export function catalogEntries(products: unknown, arch: string): CatalogEntry[] {
  if (!isObj(products) || !isObj(products.products)) throw new StreamFormatError("products file has no 'products' object");
  const out: CatalogEntry[] = [];
  for (const [key, p] of Object.entries(products.products)) {
    if (!isObj(p) || !isObj(p.versions)) continue;
    const pArch = str(p.arch);
    if (pArch && pArch !== arch) continue;
    const versions = Object.keys(p.versions).sort().reverse();
    for (const v of versions) {
      const ver = p.versions[v];
      if (!isObj(ver) || !isObj(ver.items)) continue;
      const file = pickRootfs(ver.items);
      if (!file) continue;
      const id = imageIdOf(key);
      if (!id) break;
      const aliases =
        typeof p.aliases === 'string'
          ? p.aliases
              .split(',')
              .map((a) => a.trim())
              .filter(Boolean)
          : [];
      out.push({
        image_id: id,
        product: key,
        os: str(p.os),
        release: str(p.release),
        arch: pArch,
        variant: str(p.variant),
        version: v,
        aliases,
        size_bytes: file.size,
        sha256: file.sha256,
        file,
      });
      break;
    }
  }
  return out.sort((a, b) => a.image_id.localeCompare(b.image_id));
}

function pickRootfs(items: Record<string, unknown>): StreamFile | null {
  const files: StreamFile[] = [];
  for (const [name, it] of Object.entries(items)) {
    if (!isObj(it)) continue;
    const ftype = str(it.ftype) ?? name;
    const path = str(it.path);
    const sha256 = str(it.sha256);
    const size = typeof it.size === 'number' && Number.isSafeInteger(it.size) && it.size >= 0 ? it.size : null;
    if (!path || !sha256 || !/^[0-9a-f]{64}$/i.test(sha256) || size === null) continue;
    if (!ROOTFS_FTYPES.includes(ftype)) continue;
    files.push({ path, sha256: sha256.toLowerCase(), size, ftype });
  }
  files.sort((a, b) => ROOTFS_FTYPES.indexOf(a.ftype) - ROOTFS_FTYPES.indexOf(b.ftype));
  return files[0] ?? null;
}

/**
 * The URL of a file below the server base, refusing paths that leave it
 * (an index is data from the network: '..' or an absolute URL must not
 * redirect the download elsewhere).
 */
export function fileUrl(base: string, rel: string): string {
  if (/^[a-z][a-z0-9+.-]*:/i.test(rel) || rel.startsWith('/') || rel.startsWith('\\') || rel.split('/').includes('..')) {
    throw new StreamFormatError(`the index names a file outside the server: '${rel.slice(0, 80)}'`);
  }
  return new URL(rel, base).toString();
}
