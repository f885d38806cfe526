/**
 * qemu-img: disk files (create, linked clones, copies, growth) and their
 * metadata. `info` runs with -U (force-share) so that it can read the chain of
 * a disk a running VM holds.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/run.js';
import { badRequest } from '../../lib/errors.js';
import type { ImageInfo } from '../driver.js';

export type { ImageInfo };

const INSTALL = 'the qemu-utils package';

/** Parses `qemu-img info --output=json` (one image). */
export function parseImageInfo(json: string): ImageInfo {
  const j = JSON.parse(json) as Record<string, any>;
  if (typeof j.format !== 'string' || typeof j['virtual-size'] !== 'number') throw new Error('qemu-img info gave no format or virtual-size');
  const backing = (j['full-backing-filename'] ?? j['backing-filename'] ?? null) as string | null;
  return {
    format: j.format,
    virtualSize: j['virtual-size'],
    actualSize: typeof j['actual-size'] === 'number' ? j['actual-size'] : 0,
    backingFile: backing,
    corrupt: Boolean(j['format-specific']?.data?.corrupt),
  };
}

/** Parses `qemu-img info --backing-chain --output=json`: the image first, its base last. */
export function parseBackingChain(json: string): ImageInfo[] {
  const arr = JSON.parse(json) as unknown[];
  if (!Array.isArray(arr)) throw new Error('qemu-img info --backing-chain did not give a list');
  return arr.map((x) => parseImageInfo(JSON.stringify(x)));
}

export async function imageInfo(file: string, signal?: AbortSignal): Promise<ImageInfo> {
  const r = await run('qemu-img', ['info', '-U', '--output=json', file], { install: INSTALL, timeoutMs: 30_000, signal });
  return parseImageInfo(r.stdout);
}

export async function backingChain(file: string): Promise<ImageInfo[]> {
  const r = await run('qemu-img', ['info', '-U', '--backing-chain', '--output=json', file], { install: INSTALL, timeoutMs: 30_000 });
  return parseBackingChain(r.stdout);
}

/** A disk whose backing chain leaves the directories hostd keeps disks in. */
export class DiskChainEscape extends Error {
  constructor(msg: string) {
    super(msg);
    this.name = 'DiskChainEscape';
  }
}

/** Whether the real path `real` lies inside one of `roots` (themselves resolved). */
async function inside(real: string, roots: string[]): Promise<boolean> {
  for (const r of roots) {
    const root = await fs.realpath(r).catch(() => null);
    if (root && (real === root || real.startsWith(root + path.sep))) return true;
  }
  return false;
}

/**
 * What `qemu-img info` said of a layer, by real path, reused while the file is
 * the same one with the same size and times (images and warm-state layers
 * never change, so a resume reads only its new top layer).
 */
export class ChainCache {
  private readonly m = new Map<string, { key: string; info: ImageInfo }>();

  get(real: string, key: string): ImageInfo | undefined {
    const hit = this.m.get(real);
    return hit?.key === key ? hit.info : undefined;
  }

  set(real: string, key: string, info: ImageInfo): void {
    if (this.m.size >= 4096) this.m.clear();
    this.m.set(real, { key, info });
  }
}

/**
 * The backing chain of `file`, walked one layer at a time: `qemu-img info`
 * without --backing-chain opens only the layer named, and each backing file
 * is checked before it is opened. Every backing file must be a plain absolute
 * path (no `json:` or protocol names: those can reach any file or host),
 * whose real path is a regular qcow2 file inside `roots`. The top layer is
 * checked too unless `topAnywhere` (an operator's import names any file).
 * Throws DiskChainEscape naming the layer that leaves.
 */
export async function confinedChain(file: string, roots: string[], opts: { topAnywhere?: boolean; cache?: ChainCache } = {}): Promise<ImageInfo[]> {
  const chain: ImageInfo[] = [];
  let cur = file;
  for (let depth = 0; ; depth++) {
    if (depth > 64) throw new DiskChainEscape(`the backing chain of ${file} is more than 64 layers deep`);
    let cached: { real: string; key: string } | null = null;
    if (depth > 0 || !opts.topAnywhere) {
      const real = await fs.realpath(cur).catch(() => null);
      if (!real || !(await inside(real, roots))) {
        throw new DiskChainEscape(
          `${depth === 0 ? 'disk' : 'backing file'} '${cur}' of ${file} is outside the storage pools' VM directories (hostd opens no disk elsewhere)`,
        );
      }
      const st = await fs.stat(real);
      if (!st.isFile()) throw new DiskChainEscape(`backing file '${cur}' of ${file} is not a regular file`);
      cached = { real, key: `${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}` };
    }
    const info = (cached && opts.cache?.get(cached.real, cached.key)) || (await imageInfo(cur));
    if (cached) opts.cache?.set(cached.real, cached.key, info);
    if (depth > 0 && info.format !== 'qcow2') throw new DiskChainEscape(`backing file '${cur}' of ${file} is ${info.format}, not qcow2`);
    chain.push(info);
    const next = info.backingFile;
    if (!next) return chain;
    if (!path.isAbsolute(next)) throw new DiskChainEscape(`${cur} names a backing file '${next.slice(0, 200)}' that is not a plain absolute path`);
    cur = next;
  }
}

/** A new qcow2: empty, or a copy-on-write overlay on `backing` (absolute path, qcow2). */
export async function createQcow2(file: string, sizeBytes: number | null, backing?: string): Promise<void> {
  const args = ['create', '-q', '-f', 'qcow2'];
  if (backing) args.push('-F', 'qcow2', '-b', backing);
  args.push(file);
  if (sizeBytes !== null) args.push(String(sizeBytes));
  await run('qemu-img', args, { install: INSTALL, timeoutMs: 30_000 });
}

/** Grows a disk file that no running QEMU holds. */
export async function resizeImage(file: string, sizeBytes: number): Promise<void> {
  await run('qemu-img', ['resize', '-q', file, String(sizeBytes)], { install: INSTALL, timeoutMs: 60_000 });
}

/**
 * Copies `src` (its whole backing chain, flattened) into a new standalone
 * qcow2 `dst`. Progress is estimated from the bytes written against the
 * bytes the source chain holds (qemu-img writes the output in order).
 */
export async function convertToQcow2(
  src: string,
  dst: string,
  opts: { signal?: AbortSignal; onProgress?: (pct: number) => void; sourceFormat?: string } = {},
): Promise<void> {
  let total = 0;
  if (opts.onProgress) {
    try {
      const chain = await backingChain(src);
      total = chain.reduce((s, i) => s + i.actualSize, 0);
    } catch {
      total = 0;
    }
  }
  const args = ['convert', '-U', '-O', 'qcow2'];
  if (opts.sourceFormat) args.push('-f', opts.sourceFormat);
  args.push(src, dst);
  let timer: NodeJS.Timeout | null = null;
  if (opts.onProgress && total > 0) {
    timer = setInterval(() => {
      fs.stat(dst).then(
        (st) => opts.onProgress!(Math.min(99, Math.floor(((st.blocks * 512) / total) * 100))),
        () => undefined,
      );
    }, 500);
  }
  try {
    await run('qemu-img', args, { install: INSTALL, timeoutMs: 0, signal: opts.signal });
  } finally {
    if (timer) clearInterval(timer);
  }
}

export const GiB = 1024 ** 3;

/** A size in GiB as bytes, refusing values QEMU cannot address. */
export function gib(n: number, arg: string): number {
  if (!Number.isInteger(n) || n < 1) throw badRequest(`argument '${arg}' must be at least 1 (GiB)`);
  if (n > 65536) throw badRequest(`argument '${arg}' must be at most 65536 (GiB)`);
  return n * GiB;
}
