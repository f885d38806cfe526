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
import { isEntryIntent, type EntryIntent, type Folder, type FolderIntent, type FolderReport } from './records.js';

/**
 * Finishes or undoes one interrupted change; returns the record writes of
 * the outcome. A change found made owes the event its intent names: put in
 * `owed` under its key, it is written with the commit (events.ts `settled`).
 */
export async function settle(c: FoldersContext, folderId: string, intent: FolderIntent, owed?: Map<string, FolderReport>): Promise<JournalOp[]> {
  await c.ready();
  /** The change was made: its event is owed, and `ops` are its record writes. */
  const made = (ops: JournalOp[]): JournalOp[] => {
    if (intent.report && owed) owed.set(folderId, intent.report);
    return ops;
  };
  if (isEntryIntent(intent)) return (await settleEntry(c, intent)) ? made([]) : [];
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
      return (await isDir(intent.rec)) ? made([c.records.putOp(intent.rec)]) : [];
    case 'rename':
      return !(await isDir(intent.from)) && (await isDir(intent.to)) ? made([c.records.putOp(intent.to)]) : [];
    case 'delete': {
      if (await isDir(intent.rec)) return [];
      // Older intents held the trash's absolute path: only its last segment is used.
      await c.removeQuietly(path.dirname(intent.rec.path), path.basename(intent.trash));
      return made([c.records.delOp(folderId)]);
    }
  }
}

/**
 * An entry change (nothing to write): finished or undone; true when it was
 * found made (and kept). A place that cannot be reached now throws (the
 * intent stays pending).
 */
async function settleEntry(c: FoldersContext, intent: EntryIntent): Promise<boolean> {
  let root: string;
  try {
    root = await c.placeRoot(intent.place);
  } catch (err) {
    if (intent.place.kind === 'folder') return false; // the folder is gone, and its tree with it
    throw err; // the location is not mounted (or not known yet): retried on a later call
  }
  const quiet = (err: unknown) => {
    if (!isMissing(err) && !(err instanceof FsProblem)) throw err;
  };
  const look = async (rel: string) => (await c.fs.look(root, rel).catch(() => null))?.entry ?? null;
  const isThere = async (rel: string) => (await look(rel)) !== null;
  switch (intent.op) {
    case 'copy': {
      // Placed: the temporary entry was renamed to its destination (older intents name no destination).
      const placed = !(await isThere(joinRel(intent.parent, intent.temp))) && intent.dest !== undefined && (await isThere(intent.dest));
      await c.fs.remove(root, joinRel(intent.parent, intent.temp)).catch(quiet);
      return placed;
    }
    case 'remove':
      // Renamed aside, the entry is gone: the removal is finished here.
      await c.fs.remove(root, joinRel(intent.parent, intent.trash)).catch(quiet);
      return intent.entry !== undefined && !(await isThere(intent.entry));
    case 'moves': {
      const done: Array<{ from: string; to: string }> = [];
      for (const p of intent.pairs) if (!(await isThere(p.from)) && (await isThere(p.to))) done.push(p);
      if (done.length === intent.pairs.length) return true;
      for (const p of done.reverse()) await c.fs.rename(root, p.to, p.from).catch(quiet);
      return false;
    }
    case 'mkdirs':
      // All or none, and the caller had no answer: undone, even when every folder was made.
      for (const n of intent.names) await c.fs.removeEmptyDir(root, joinRel(intent.parent, n)).catch(quiet);
      return false;
    case 'mkdir':
      return (await look(intent.rel))?.type === 'folder';
    case 'move':
      return !(await isThere(intent.from)) && (await isThere(intent.to));
    case 'unlink':
      return !(await isThere(intent.rel));
  }
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
