/**
 * An app's data directory as a tree of files. For a move: copied with
 * `cp -a` (owners, modes, times, links, sparse files, reflinks where the
 * filesystem has them) with progress read from the growing copy, then
 * verified by walking both trees and comparing every entry's type, size,
 * mode, owner, link target and, for regular files, SHA-256 of the content.
 */
import crypto from 'node:crypto';
import { createReadStream } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { errnoCode } from '../lib/errors.js';
import { run } from '../lib/run.js';

/** Whether anything (a link included) is at `p`. */
export async function exists(p: string): Promise<boolean> {
  try {
    await fs.lstat(p);
    return true;
  } catch (err) {
    if (errnoCode(err) === 'ENOENT') return false;
    throw err;
  }
}

export interface Entry {
  type: 'file' | 'dir' | 'link' | 'other';
  size: number;
  mode: number;
  uid: number;
  gid: number;
  link?: string;
}

/** Every entry below `root`, by relative path ('' is the root itself); never follows links. */
export async function walk(root: string, signal?: AbortSignal): Promise<Map<string, Entry>> {
  const out = new Map<string, Entry>();
  const visit = async (rel: string): Promise<void> => {
    if (signal?.aborted) throw new Error('cancelled');
    const abs = rel ? path.join(root, rel) : root;
    const st = await fs.lstat(abs);
    const type: Entry['type'] = st.isFile() ? 'file' : st.isDirectory() ? 'dir' : st.isSymbolicLink() ? 'link' : 'other';
    const e: Entry = { type, size: type === 'file' ? st.size : 0, mode: st.mode, uid: st.uid, gid: st.gid };
    if (type === 'link') e.link = await fs.readlink(abs);
    out.set(rel, e);
    if (type === 'dir') {
      for (const name of (await fs.readdir(abs)).sort()) await visit(rel ? `${rel}/${name}` : name);
    }
  };
  await visit('');
  return out;
}

export function totalBytes(entries: Map<string, Entry>): number {
  let n = 0;
  for (const e of entries.values()) n += e.size;
  return n;
}

async function sha256(file: string, signal?: AbortSignal): Promise<string> {
  const h = crypto.createHash('sha256');
  for await (const chunk of createReadStream(file, { signal })) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** Copies the contents of `from` into the new directory `to`, reporting bytes copied so far. */
export async function copyTree(from: string, to: string, total: number, onBytes: (done: number) => void, signal?: AbortSignal): Promise<void> {
  await fs.mkdir(to, { recursive: false });
  const src = await fs.stat(from);
  await fs.chmod(to, src.mode & 0o7777);
  await fs.chown(to, src.uid, src.gid);
  let stop = false;
  const poll = (async () => {
    while (!stop) {
      await new Promise((r) => setTimeout(r, 500));
      if (stop) break;
      try {
        onBytes(Math.min(total, totalBytes(await walk(to))));
      } catch {
        /* the copy is changing under the walk: next time */
      }
    }
  })();
  try {
    await run('cp', ['-a', '--reflink=auto', '--', `${from}/.`, to], { timeoutMs: 0, signal, install: 'coreutils' });
  } finally {
    stop = true;
    await poll;
  }
  onBytes(total);
}

/** Throws naming the first difference between the two trees. */
export async function verifyTree(from: string, to: string, onBytes: (done: number) => void, signal?: AbortSignal): Promise<{ files: number; bytes: number }> {
  const [a, b] = await Promise.all([walk(from, signal), walk(to, signal)]);
  for (const rel of a.keys()) if (!b.has(rel)) throw new Error(`verification failed: '${rel || '/'}' is missing in the copy`);
  for (const rel of b.keys()) if (!a.has(rel)) throw new Error(`verification failed: '${rel}' is in the copy but not in the source`);
  let done = 0;
  let files = 0;
  for (const [rel, ea] of a) {
    const eb = b.get(rel)!;
    const what = rel || '/';
    if (ea.type !== eb.type) throw new Error(`verification failed: '${what}' is a ${ea.type} in the source and a ${eb.type} in the copy`);
    if (ea.mode !== eb.mode || ea.uid !== eb.uid || ea.gid !== eb.gid) throw new Error(`verification failed: '${what}' has another mode or owner in the copy`);
    if (ea.link !== eb.link) throw new Error(`verification failed: link '${what}' points elsewhere in the copy`);
    if (ea.type !== 'file') continue;
    if (ea.size !== eb.size) throw new Error(`verification failed: '${what}' has ${ea.size} bytes in the source and ${eb.size} in the copy`);
    const [ha, hb] = await Promise.all([sha256(path.join(from, rel), signal), sha256(path.join(to, rel), signal)]);
    if (ha !== hb) throw new Error(`verification failed: the content of '${what}' differs in the copy`);
    files++;
    done += ea.size;
    onBytes(done);
  }
  return { files, bytes: done };
}
