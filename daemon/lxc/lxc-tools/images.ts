/**
 * Cached template images on the pools: `<pool>/.hostd-lxc/images/<id>/` holds
 * the rootfs tarball and `image.json`. The disk is the source of truth (a pool
 * carried to another host brings its images): an image appears only by an
 * atomic rename of a finished work dir, so a crash never leaves half an image
 * in the list. Also the image server: its simplestreams catalog (cached 30 s;
 * simplestreams.ts reads the format) and downloads checked against it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { PoolConfig } from '../../config.js';
import { ApiError, badRequest, unavailable } from '../../lib/errors.js';
import type { CatalogEntry, Compression, ImageFiles, ImageMeta, ImageRef } from '../driver.js';
import { isImageId } from '../naming.js';
import { catalogEntries, fileUrl, productPaths, streamArch, StreamFormatError } from './simplestreams.js';
import { compressionOf, imagesDir, readHead, TAR_SUFFIX, tmpRoot } from './storage.js';

/** How long a catalog read from the image server is kept. */
const CATALOG_TTL_MS = 30_000;

export const META_FILE = 'image.json';

async function readMeta(dir: string): Promise<ImageMeta | null> {
  try {
    const m = JSON.parse(await fsp.readFile(path.join(dir, META_FILE), 'utf8')) as ImageMeta;
    if (typeof m !== 'object' || !m || typeof m.file !== 'string' || m.file.includes('/')) return null;
    return m;
  } catch {
    return null;
  }
}

/** A stream stage that hashes and counts what passes. */
function hasher(onBytes: (n: number) => void): { stage: Transform; digest: () => string; bytes: () => number } {
  const h = crypto.createHash('sha256');
  let n = 0;
  const stage = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      h.update(chunk);
      n += chunk.length;
      try {
        onBytes(n);
      } catch (err) {
        cb(err as Error);
        return;
      }
      cb(null, chunk);
    },
  });
  return { stage, digest: () => h.digest('hex'), bytes: () => n };
}

async function fetchJson(url: string): Promise<unknown> {
  let res: Response;
  try {
    res = await fetch(url, { signal: AbortSignal.timeout(20_000) });
  } catch (err) {
    throw unavailable(`cannot reach the image server: ${(err as Error).message}`);
  }
  if (!res.ok) throw unavailable(`the image server answered ${res.status} for ${new URL(url).pathname}`);
  try {
    return await res.json();
  } catch {
    throw unavailable(`the image server sent something that is not JSON at ${new URL(url).pathname}`);
  }
}

const unusable = (err: unknown) => unavailable(`the image server's index is not usable: ${(err as Error).message}`);

export class ImageStore implements ImageFiles {
  private catalogCache: { at: number; server: string; entries: CatalogEntry[] } | null = null;

  constructor(
    private readonly pools: PoolConfig[],
    private readonly remove_: (p: string) => Promise<void>,
  ) {}

  pool(storageId: string): PoolConfig | undefined {
    return this.pools.find((p) => p.id === storageId);
  }

  dirOf(pool: PoolConfig, imageId: string): string {
    return path.join(imagesDir(pool.path), imageId);
  }

  async get(pool: PoolConfig, imageId: string): Promise<ImageRef | null> {
    const dir = this.dirOf(pool, imageId);
    const meta = await readMeta(dir);
    if (!meta) return null;
    return { meta: { ...meta, image_id: imageId }, storage_id: pool.id, dir, file: path.join(dir, meta.file) };
  }

  /** Every cached image, pool by pool (pool order of the config), then by id. */
  async list(): Promise<ImageRef[]> {
    const out: ImageRef[] = [];
    for (const pool of this.pools) {
      let names: string[] = [];
      try {
        names = (await fsp.readdir(imagesDir(pool.path))).filter((n) => isImageId(n)).sort();
      } catch {
        continue;
      }
      for (const n of names) {
        const ref = await this.get(pool, n);
        if (ref) out.push(ref);
      }
    }
    return out;
  }

  /** The image `id` on `storageId`, or on the first pool that has it. */
  async find(imageId: string, storageId?: string | null): Promise<ImageRef | null> {
    if (storageId) {
      const pool = this.pool(storageId);
      return pool ? this.get(pool, imageId) : null;
    }
    for (const pool of this.pools) {
      const ref = await this.get(pool, imageId);
      if (ref) return ref;
    }
    return null;
  }

  /** Writes image.json into a work dir (fsync'd, it is renamed into place next). */
  async writeMeta(workDir: string, meta: ImageMeta): Promise<void> {
    const fh = await fsp.open(path.join(workDir, META_FILE), 'w', 0o600);
    try {
      await fh.writeFile(JSON.stringify(meta, null, 2) + '\n');
      await fh.sync();
    } finally {
      await fh.close();
    }
  }

  /** Renames a finished work dir into place; EEXIST/ENOTEMPTY when the id is taken meanwhile. */
  async install(workDir: string, pool: PoolConfig, imageId: string): Promise<string> {
    const final = this.dirOf(pool, imageId);
    await fsp.mkdir(path.dirname(final), { recursive: true, mode: 0o700 });
    if (fs.existsSync(final)) throw Object.assign(new Error('exists'), { code: 'EEXIST' });
    await fsp.rename(workDir, final);
    return final;
  }

  /** One rename takes it out of the list (into the pool's work dir); the rest is clean-up that recovery may finish. */
  async remove(ref: ImageRef, pool: PoolConfig): Promise<void> {
    const tmp = path.join(tmpRoot(pool.path), `deleted-${crypto.randomBytes(6).toString('hex')}`);
    await fsp.rename(ref.dir, tmp);
    await this.remove_(tmp);
  }

  async catalog(server: string): Promise<CatalogEntry[]> {
    const c = this.catalogCache;
    if (c && c.server === server && Date.now() - c.at < CATALOG_TTL_MS) return c.entries;
    try {
      const index = await fetchJson(fileUrl(server, 'streams/v1/index.json'));
      const entries: CatalogEntry[] = [];
      for (const p of productPaths(index)) entries.push(...catalogEntries(await fetchJson(fileUrl(server, p)), streamArch(process.arch)));
      this.catalogCache = { at: Date.now(), server, entries };
      return entries;
    } catch (err) {
      if (err instanceof StreamFormatError) throw unusable(err);
      throw err;
    }
  }

  fileUrl(server: string, entry: CatalogEntry): string {
    try {
      return fileUrl(server, entry.file.path);
    } catch (err) {
      throw unusable(err);
    }
  }

  /**
   * Downloads `url` into `dest`, checking the size and SHA-256 the index
   * gave; progress in bytes; answers the tarball's compression. Throws (and
   * leaves `dest` for the caller's cleanup) on any mismatch, HTTP error,
   * abort, or a file that is not a tar archive.
   */
  async download(
    url: string,
    dest: string,
    want: { sha256: string; size: number },
    signal: AbortSignal,
    progress: (bytes: number, total: number) => void,
  ): Promise<Compression> {
    let res: Response;
    try {
      res = await fetch(url, { signal, redirect: 'follow' });
    } catch (err) {
      if (signal.aborted) throw err;
      throw unavailable(`cannot reach the image server: ${(err as Error).message}`);
    }
    if (!res.ok || !res.body) throw unavailable(`the image server answered ${res.status} for ${new URL(url).pathname}`);
    const h = hasher((n) => {
      if (n > want.size) throw new Error(`the download is larger than the ${want.size} bytes the index gives`);
      progress(n, want.size);
    });
    await pipeline(Readable.fromWeb(res.body as import('node:stream/web').ReadableStream), h.stage, fs.createWriteStream(dest, { mode: 0o600 }), { signal });
    if (h.bytes() !== want.size) throw new Error(`size mismatch: got ${h.bytes()} bytes, the index gives ${want.size}`);
    const got = h.digest();
    if (got !== want.sha256) throw new Error(`checksum mismatch: SHA-256 ${got} differs from the index's ${want.sha256}`);
    const comp = compressionOf(await readHead(dest));
    if (!comp) throw new Error('the downloaded file is not a tar archive');
    return comp;
  }

  async checkSource(src: string): Promise<void> {
    try {
      if (!(await fsp.stat(src)).isFile()) throw badRequest(`'${src}' is not a regular file`);
    } catch (err) {
      if (err instanceof ApiError) throw err;
      throw badRequest(`cannot read '${src}'`);
    }
  }

  /** Copies a local tarball into `workDir` under its canonical name, hashing it; returns the meta basics. */
  async importFile(
    src: string,
    workDir: string,
    signal: AbortSignal,
    progress: (bytes: number, total: number) => void,
  ): Promise<Pick<ImageMeta, 'file' | 'compression' | 'size_bytes' | 'sha256'>> {
    let st: fs.Stats;
    try {
      st = await fsp.stat(src);
    } catch {
      throw badRequest(`cannot read '${src}'`);
    }
    if (!st.isFile()) throw badRequest(`'${src}' is not a regular file`);
    const comp = compressionOf(await readHead(src));
    if (!comp) throw badRequest(`'${src}' is not a tar archive (plain, xz, gzip or zstd)`);
    const file = 'rootfs' + TAR_SUFFIX[comp];
    const h = hasher((n) => progress(n, st.size));
    await pipeline(fs.createReadStream(src), h.stage, fs.createWriteStream(path.join(workDir, file), { mode: 0o600 }), { signal });
    return { file, compression: comp, size_bytes: h.bytes(), sha256: h.digest() };
  }

  /** SHA-256 and size of a file (template captures). */
  async digest(file: string): Promise<{ sha256: string; size_bytes: number }> {
    const h = hasher(() => undefined);
    await pipeline(fs.createReadStream(file), h.stage, new (await import('node:stream')).Writable({ write: (_c, _e, cb) => cb() }));
    return { sha256: h.digest(), size_bytes: h.bytes() };
  }
}
