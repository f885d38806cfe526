/**
 * Managed folders: directories `<pool path>/<name>` in the configured storage
 * pools, kept as records (records.ts). List, create, rename and delete, and
 * the folders other domains may use (the `folders` port).
 */
import crypto from 'node:crypto';
import path from 'node:path';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { FolderRef } from '../domain.js';
import { noNotes } from '../lib/caller.js';
import { actorOf } from '../lib/operator.js';
import { conflict, errnoCode as code, internal, notFound } from '../lib/errors.js';
import { isInternalName } from '../lib/host-paths.js';
import { isMissing, nameKey, placeKey, TRASH_PREFIX, type Call, type FoldersContext } from './context.js';
import { FsProblem } from './driver.js';
import { recordReport } from './events.js';
import { checkNotInternal, validateName } from './names.js';
import type { Folder } from './records.js';

/** A folder name: a valid single name, and not one of the daemon's own. */
function folderName(name: string, arg: string): string {
  return checkNotInternal(validateName(name, arg), arg);
}

/**
 * One answer per listing: the records keep a frozen listing until a folder
 * changes, and its answer is frozen too, so a transport can keep its JSON
 * text as long as it lives (api/json-text.ts) instead of serialising the same
 * list on every call.
 */
const answers = new WeakMap<readonly Folder[], ResultOf<'folders_list'>>();

export async function listFolders(c: FoldersContext, _req: ArgsOf<'folders_list'> = {}): Promise<ResultOf<'folders_list'>> {
  const listing = c.records.all();
  let answer = answers.get(listing);
  if (!answer) {
    answer = Object.freeze({ folders: listing });
    answers.set(listing, answer);
  }
  return answer;
}

export async function createFolder(c: FoldersContext, req: ArgsOf<'folders_create'>, ctx: Call = noNotes): Promise<ResultOf<'folders_create'>> {
  const pool = c.pools.find((p) => p.id === req.storage_id);
  if (!pool) throw notFound(`storage pool '${req.storage_id}' not found`);
  const name = folderName(req.name, 'name');
  await c.ready();
  // Only this name is held: creates of other names run side by side.
  return c.lock.run([nameKey(pool.id, name)], async () => {
    const taken = () => conflict(`a folder named '${name}' already exists in storage pool '${pool.id}'`);
    if (c.records.findByName(pool.id, name)) throw taken();
    const rec: Folder = { folder_id: c.records.newId(), name, storage_id: pool.id, path: path.join(pool.path, name), created_at: new Date().toISOString() };
    const report = recordReport(rec, 'created', 'folders_create', actorOf(ctx));
    try {
      // The record and its `created` event: one batch.
      await c.journal(report).run(rec.folder_id, { op: 'create', rec, report }, () => c.fs.mkdir(pool.path, name), {
        commit: () => [c.records.putOp(rec)],
      });
    } catch (err) {
      c.records.release(rec.folder_id);
      if (err instanceof FsProblem && err.kind === 'exists') throw taken();
      if (err instanceof FsProblem && err.kind === 'root-missing') throw internal(`storage pool '${pool.id}' directory ${pool.path} is missing`);
      throw err;
    }
    c.records.applied(rec.folder_id, rec);
    ctx.note({ summary: `Created folder ${name}`, target: name, metadata: { folder_id: rec.folder_id, storage_id: pool.id } });
    return { folder: { ...rec } };
  });
}

export async function renameFolder(c: FoldersContext, req: ArgsOf<'folders_update'>, ctx: Call = noNotes): Promise<ResultOf<'folders_update'>> {
  const newName = folderName(req.new_name, 'new_name');
  // The new name's key (its pool is the folder's, which a rename never changes) and the folder's.
  const pool = c.folder(req.folder_id).storage_id;
  return c.lock.run([nameKey(pool, newName), placeKey('folder', req.folder_id)], async () => {
    const rec = c.folder(req.folder_id);
    // Renaming it would move a domain's own directory away from under it.
    if (isInternalName(rec.name)) throw c.reserved(rec);
    if (newName === rec.name) {
      // Nothing changes: no event (a rename to its own name touches no folder).
      ctx.note({ summary: `Renamed folder ${rec.name} to ${newName}`, target: rec.name, metadata: { folder_id: rec.folder_id } });
      return { folder: { ...rec } };
    }
    const taken = () => conflict(`a folder named '${newName}' already exists in storage pool '${rec.storage_id}'`);
    if (c.records.findByName(rec.storage_id, newName)) throw taken();
    await c.ready();
    const poolDir = path.dirname(rec.path);
    let free: boolean;
    try {
      free = !(await c.fs.look(poolDir, newName)).entry;
    } catch (err) {
      if (err instanceof FsProblem && err.kind === 'root-missing') throw c.missingDir(rec);
      // A link in the pool directory leading out is an entry of that name all the same.
      if (err instanceof FsProblem && (err.kind === 'escape' || err.kind === 'loop')) free = false;
      else throw err;
    }
    if (!free) throw taken();
    const next: Folder = { ...rec, name: newName, path: path.join(poolDir, newName) };
    const report = recordReport(next, 'renamed', 'folders_update', actorOf(ctx));
    try {
      await c.journal(report).run(
        rec.folder_id,
        { op: 'rename', from: rec, to: next, report },
        async () => {
          await c.fs.rename(poolDir, path.basename(rec.path), newName);
          await c.pause('rename.renamed');
        },
        { commit: () => [c.records.putOp(next)] },
      );
    } catch (err) {
      if (isMissing(err)) throw c.missingDir(rec);
      if (code(err) === 'EEXIST' || code(err) === 'ENOTEMPTY') throw taken();
      throw err;
    }
    c.records.applied(next.folder_id, next);
    ctx.note({ summary: `Renamed folder ${rec.name} to ${newName}`, target: newName, metadata: { folder_id: rec.folder_id } });
    return { folder: { ...next } };
  });
}

export async function deleteFolder(c: FoldersContext, req: ArgsOf<'folders_delete'>, ctx: Call = noNotes): Promise<ResultOf<'folders_delete'>> {
  // A delete frees a name and takes none: the folder's key alone.
  return c.lock.run([placeKey('folder', req.folder_id)], async () => {
    const rec = c.folder(req.folder_id);
    const report = recordReport(rec, 'deleted', 'folders_delete', actorOf(ctx));
    if (isInternalName(rec.name)) {
      // Made before the rule: its directory is (or may become) a domain's own. The record is
      // forgotten and the directory kept as it is: nothing of another domain is deleted.
      await c.journal(report).commit(rec.folder_id, [c.records.delOp(rec.folder_id)]);
      c.records.applied(rec.folder_id, null);
      ctx.note({
        summary: `Forgot folder ${rec.name}; its directory ${rec.path} is kept (reserved name)`,
        target: rec.name,
        metadata: { folder_id: rec.folder_id, directory_kept: true },
      });
      return { folder: { ...rec }, deleted: true, directory_kept: true };
    }
    // The record's directory is always <pool>/<name>; refuse anything else rather than remove it.
    if (path.basename(rec.path) !== rec.name || !path.isAbsolute(rec.path)) {
      throw internal(`folder '${rec.name}' has an unexpected path ${rec.path}; not deleting it`);
    }
    await c.ready();
    // The tree is first renamed aside (atomic), then the record goes, then
    // the tree is removed; removal never follows symlinks inside it.
    const poolDir = path.dirname(rec.path);
    const trash = `${TRASH_PREFIX}${rec.folder_id}-${crypto.randomBytes(4).toString('hex')}`;
    const journal = c.journal(report);
    await journal.begin(rec.folder_id, { op: 'delete', rec, trash, report });
    try {
      await c.fs.rename(poolDir, rec.name, trash);
    } catch (err) {
      if (!isMissing(err)) {
        await journal.drop(rec.folder_id);
        throw err;
      }
    }
    await journal.commit(rec.folder_id, [c.records.delOp(rec.folder_id)]);
    c.records.applied(rec.folder_id, null);
    await c.removeQuietly(poolDir, trash);
    ctx.note({ summary: `Deleted folder ${rec.name}`, target: rec.name, metadata: { folder_id: rec.folder_id } });
    return { folder: { ...rec }, deleted: true };
  });
}

/** A folder as other domains see it (404 when unknown; 409 for a reserved name, never handed out to be mounted). */
export function folderRef(c: FoldersContext, id: string): FolderRef {
  const r = c.folder(id);
  if (isInternalName(r.name)) throw c.reserved(r);
  return { folder_id: r.folder_id, name: r.name, storage_id: r.storage_id, path: r.path };
}

/** The folders other domains may use (those with a reserved name left out). */
export function folderRefs(c: FoldersContext): FolderRef[] {
  return c.records
    .all()
    .filter((r) => !isInternalName(r.name))
    .map((r) => ({ folder_id: r.folder_id, name: r.name, storage_id: r.storage_id, path: r.path }));
}
