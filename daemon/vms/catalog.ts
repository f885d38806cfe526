/**
 * The catalog of downloadable cloud images, and their download: resumable
 * (a `.part` file plus a small JSON sidecar naming the URL; a later fetch of
 * the same URL continues with an HTTP Range request), verified against the
 * checksum the catalog gives or the publisher's SHA256SUMS/SHA512SUMS file.
 *
 * The bundled catalog (`catalog.json`) lists Debian 12 and Ubuntu 24.04 with
 * their publishers' checksum lists; `vms.catalog_file` (a JSON array of the
 * same entries) replaces it.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { badRequest } from '../lib/errors.js';
import { isImageId } from './common.js';
import bundled from './catalog.json' with { type: 'json' };

export interface CatalogEntry {
  id: string;
  name: string;
  url: string;
  /** `sha256:<hex>` or `sha512:<hex>`; when absent, `checksum_url` is read. */
  checksum?: string;
  /** A SHA256SUMS/SHA512SUMS file listing the image's file name. */
  checksum_url?: string;
  /** Format of the download (qcow2 or raw); detected when absent. */
  format?: 'qcow2' | 'raw';
  min_cpu_cores: number;
  min_memory_mb: number;
  min_disk_gb: number;
  default_user: string | null;
  labels?: Record<string, string>;
}

/** The bundled catalog (catalog.json next to this file), validated like a replacement. */
export const BUNDLED_CATALOG: CatalogEntry[] = parseCatalog(bundled, 'daemon/vms/catalog.json');

/** Validates a catalog (the bundled one or a replacement file's JSON). */
export function parseCatalog(json: unknown, where: string): CatalogEntry[] {
  if (!Array.isArray(json)) throw new Error(`${where}: the catalog must be a JSON array of entries`);
  const seen = new Set<string>();
  return json.map((e, i) => {
    const at = `${where}[${i}]`;
    if (!e || typeof e !== 'object') throw new Error(`${at}: not an object`);
    const x = e as Record<string, unknown>;
    const str = (k: string, req: boolean) => {
      const v = x[k];
      if (v === undefined && !req) return undefined;
      if (typeof v !== 'string' || !v) throw new Error(`${at}.${k} must be a non-empty string`);
      return v;
    };
    const int = (k: string, def: number) => {
      const v = x[k] ?? def;
      if (typeof v !== 'number' || !Number.isInteger(v) || v < 0) throw new Error(`${at}.${k} must be a non-negative integer`);
      return v;
    };
    const id = str('id', true)!;
    if (!isImageId(id)) throw new Error(`${at}.id must be 1-64 of [A-Za-z0-9_.-]`);
    if (seen.has(id)) throw new Error(`${at}.id '${id}' appears twice`);
    seen.add(id);
    const url = str('url', true)!;
    if (!/^https?:\/\//.test(url)) throw new Error(`${at}.url must be http(s)`);
    const checksum = str('checksum', false);
    if (checksum && !/^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/i.test(checksum)) throw new Error(`${at}.checksum must be sha256:<hex> or sha512:<hex>`);
    const checksumUrl = str('checksum_url', false);
    if (!checksum && !checksumUrl) throw new Error(`${at} needs checksum or checksum_url`);
    const format = str('format', false);
    if (format && format !== 'qcow2' && format !== 'raw') throw new Error(`${at}.format must be qcow2 or raw`);
    const labels = x.labels ?? {};
    if (typeof labels !== 'object' || Array.isArray(labels) || Object.values(labels as object).some((v) => typeof v !== 'string')) {
      throw new Error(`${at}.labels must map strings to strings`);
    }
    const du = x.default_user;
    if (du !== undefined && du !== null && typeof du !== 'string') throw new Error(`${at}.default_user must be a string`);
    return {
      id,
      name: str('name', false) ?? id,
      url,
      checksum: checksum?.toLowerCase(),
      checksum_url: checksumUrl,
      format: format as CatalogEntry['format'],
      min_cpu_cores: int('min_cpu_cores', 1),
      min_memory_mb: int('min_memory_mb', 512),
      min_disk_gb: int('min_disk_gb', 0),
      default_user: (du as string | undefined) ?? null,
      labels: labels as Record<string, string>,
    };
  });
}

export async function loadCatalog(file: string | null): Promise<CatalogEntry[]> {
  if (!file) return BUNDLED_CATALOG;
  const text = await fsp.readFile(file, 'utf8');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${file}: not JSON (${(err as Error).message})`);
  }
  return parseCatalog(json, file);
}

/** The hash for `fileName` in a SHA256SUMS/SHA512SUMS text (`<hex>  name` or `<hex> *name`). */
export function checksumFromSums(text: string, fileName: string): string | null {
  for (const line of text.split('\n')) {
    const m = /^([0-9a-fA-F]{64}|[0-9a-fA-F]{128})\s+\*?(.+?)\s*$/.exec(line);
    if (!m) continue;
    if (m[2] === fileName || m[2].endsWith('/' + fileName)) return `${m[1].length === 64 ? 'sha256' : 'sha512'}:${m[1].toLowerCase()}`;
  }
  return null;
}

export interface FetchProgress {
  signal?: AbortSignal;
  onProgress?: (fraction: number) => void;
  log?: (line: string) => void;
}

async function hashFile(file: string, algo: string, signal?: AbortSignal): Promise<string> {
  const h = crypto.createHash(algo);
  await pipeline(fs.createReadStream(file), h, { signal });
  return h.digest('hex');
}

/**
 * Downloads `entry` into `partFile` (continuing an earlier partial download of
 * the same URL) and verifies it. Resolves with the verified checksum; the
 * caller moves the file into place. A checksum mismatch deletes the partial
 * file (it cannot be resumed into a good one).
 */
export async function download(entry: CatalogEntry, partFile: string, p: FetchProgress = {}): Promise<string> {
  const metaFile = `${partFile}.json`;
  await fsp.mkdir(path.dirname(partFile), { recursive: true });
  let expected = entry.checksum ?? null;
  if (!expected) {
    const r = await fetch(entry.checksum_url!, { signal: p.signal });
    if (!r.ok) throw badRequest(`checksum list ${entry.checksum_url} answered HTTP ${r.status}`);
    const name = decodeURIComponent(new URL(entry.url).pathname.split('/').pop() ?? '');
    expected = checksumFromSums(await r.text(), name);
    if (!expected) throw new Error(`checksum list ${entry.checksum_url} has no line for ${name}`);
  }
  let have = 0;
  try {
    const meta = JSON.parse(await fsp.readFile(metaFile, 'utf8')) as { url?: string; checksum?: string };
    if (meta.url === entry.url && meta.checksum === expected) have = (await fsp.stat(partFile)).size;
  } catch {
    have = 0;
  }
  if (have === 0) {
    await fsp.writeFile(partFile, '');
    await fsp.writeFile(metaFile, JSON.stringify({ url: entry.url, checksum: expected }));
  }
  const headers: Record<string, string> = have > 0 ? { range: `bytes=${have}-` } : {};
  const res = await fetch(entry.url, { headers, signal: p.signal });
  if (res.status === 416 && have > 0) {
    // The partial file is already whole.
  } else {
    if (res.status !== 200 && res.status !== 206) throw new Error(`${entry.url} answered HTTP ${res.status}`);
    if (res.status === 200 && have > 0) {
      p.log?.(`the server does not resume downloads: starting ${entry.id} again`);
      have = 0;
      await fsp.writeFile(partFile, '');
    } else if (have > 0) {
      p.log?.(`resuming ${entry.id} at byte ${have}`);
    }
    const len = Number(res.headers.get('content-length') ?? 0);
    const total = len ? have + len : 0;
    let got = have;
    let lastReport = 0;
    const body = Readable.fromWeb(res.body as any);
    body.on('data', (chunk: Buffer) => {
      got += chunk.length;
      if (total && p.onProgress && Date.now() - lastReport > 250) {
        lastReport = Date.now();
        p.onProgress(got / total);
      }
    });
    await pipeline(body, fs.createWriteStream(partFile, { flags: 'a' }), { signal: p.signal });
    if (total && got < total) throw new Error(`${entry.url} ended after ${got} of ${total} bytes (run the fetch again to resume)`);
  }
  const [algo, hex] = expected.split(':');
  p.log?.(`verifying the ${algo} checksum`);
  const actual = await hashFile(partFile, algo, p.signal);
  if (actual !== hex) {
    await fsp.rm(partFile, { force: true });
    await fsp.rm(metaFile, { force: true });
    throw new Error(`checksum mismatch for ${entry.id}: expected ${algo} ${hex.slice(0, 16)}…, got ${actual.slice(0, 16)}… (the partial file was removed)`);
  }
  await fsp.rm(metaFile, { force: true });
  return expected;
}
