/**
 * What a restart finds of a change a crash interrupted (records.ts describes
 * the intents), finished or undone by what the disk shows. open() runs it
 * through the shared IntentRecovery before serving. An entry change in a
 * location that is not mounted at start (or that fails now) stays open and
 * pending; the next call in any place retries it (context.ts `resolvePlace`).
 */
import path from 'node:path';
import type { JournalOp } from '../lib/journal.js';
import { isMissing, TRASH_PREFIX, type FoldersContext } from './context.js';
import { FsProblem } from './driver.js';
import { joinRel } from './names.js';
import { isEntryIntent, type EntryIntent, type Folder, type FolderIntent } from './records.js';

/** Finishes or undoes one interrupted change; returns the record writes of the outcome. */
export async function settle(c: FoldersContext, folderId: string, intent: FolderIntent): Promise<JournalOp[]> {
  await c.ready();
  if (isEntryIntent(intent)) return settleEntry(c, intent);
  const isDir = async (rec: Folder) => {
    try {
      return (await c.fs.look(path.dirname(rec.path), path.basename(rec.path))).entry?.type === 'folder';
    } catch (err) {
      if (err instanceof FsProblem) return false;
      throw err;
    }
  };
  switch (intent.op) {
    case 'create':
      // The directory was made: the folder exists. Otherwise it never did.
      return (await isDir(intent.rec)) ? [c.records.putOp(intent.rec)] : [];
    case 'rename':
      return !(await isDir(intent.from)) && (await isDir(intent.to)) ? [c.records.putOp(intent.to)] : [];
    case 'delete': {
      if (await isDir(intent.rec)) return [];
      // Older intents held the trash's absolute path: only its last segment is used.
      await c.removeQuietly(path.dirname(intent.rec.path), path.basename(intent.trash));
      return [c.records.delOp(folderId)];
    }
  }
}

/** An entry change: nothing to write; a place that cannot be reached now throws (the intent stays pending). */
async function settleEntry(c: FoldersContext, intent: EntryIntent): Promise<JournalOp[]> {
  let root: string;
  try {
    root = await c.placeRoot(intent.place);
  } catch (err) {
    if (intent.place.kind === 'folder') return []; // the folder is gone, and its tree with it
    throw err; // the location is not mounted (or not known yet): retried on a later call
  }
  const quiet = (err: unknown) => {
    if (!isMissing(err) && !(err instanceof FsProblem)) throw err;
  };
  switch (intent.op) {
    case 'copy':
      await c.fs.remove(root, joinRel(intent.parent, intent.temp)).catch(quiet);
      break;
    case 'remove':
      await c.fs.remove(root, joinRel(intent.parent, intent.trash)).catch(quiet);
      break;
    case 'moves': {
      const isThere = async (rel: string) => !!(await c.fs.look(root, rel).catch(() => null))?.entry;
      const done: Array<{ from: string; to: string }> = [];
      for (const p of intent.pairs) if (!(await isThere(p.from)) && (await isThere(p.to))) done.push(p);
      if (done.length === intent.pairs.length) break;
      for (const p of done.reverse()) await c.fs.rename(root, p.to, p.from).catch(quiet);
      break;
    }
    case 'mkdirs':
      for (const n of intent.names) await c.fs.removeEmptyDir(root, joinRel(intent.parent, n)).catch(quiet);
      break;
  }
  return [];
}

/** What intents do not cover: trees a delete renamed aside in a pool root and never removed. */
export async function reconcile(c: FoldersContext): Promise<void> {
  await c.ready();
  for (const pool of c.pools) {
    for (const e of (await c.fs.list(pool.path, '')).entries) {
      if (e.name.startsWith(TRASH_PREFIX)) await c.fs.remove(pool.path, e.name);
    }
  }
}

/** What a log line may say about an intent. */
export function describe(intent: FolderIntent): Record<string, unknown> {
  if (isEntryIntent(intent)) return { op: intent.op, place: `${intent.place.kind}:${intent.place.id}` };
  return { op: intent.op, folder_id: intent.op === 'rename' ? intent.from.folder_id : intent.rec.folder_id };
}
