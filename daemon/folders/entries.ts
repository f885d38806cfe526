/**
 * Moving and deleting entries inside one folder or location: one move, a
 * batch of moves done in order (all or none), and a delete (a folder tree is
 * renamed aside first, so that it is gone at once and recovery can finish the
 * removal after a crash).
 */
import crypto from 'node:crypto';
import path from 'node:path';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { noNotes } from '../lib/caller.js';
import { badRequest, errnoCode as code, notFound } from '../lib/errors.js';
import { actorOf } from '../lib/operator.js';
import { everyOne, TRASH_PREFIX, type Call, type FoldersContext, type Place, type Seen } from './context.js';
import type { EntryInfo } from './driver.js';
import { contentsReport } from './events.js';
import { joinRel, parentRel, relStrictlyInside, validateNewEntry } from './names.js';
import type { EntryIntent, FolderReport } from './records.js';
import { entryOf, label, ref } from './views.js';

export async function moveEntry(c: FoldersContext, req: ArgsOf<'folders_entries_move'>, ctx: Call = noNotes): Promise<ResultOf<'folders_entries_move'>> {
  const sel = c.selector(req.src_target, req.folder_id, 'folder_id');
  if (req.dst_target && (req.dst_target.kind !== sel.kind || req.dst_target.id !== sel.id)) {
    throw badRequest(`argument 'dst_target' must name the same folder or connection as the source`);
  }
  const dstPath = c.pathArg(req.dst_target, 'dst_target', req.dst_sub_path, 'dst_sub_path');
  if (dstPath[0] === undefined || dstPath[0] === null) throw badRequest(`argument 'dst_sub_path' is required`);
  return c.lock.run([sel.key], async () => {
    const place = await sel.resolve();
    const { src, dst } = await c.transferEnds('move', place, c.pathArg(req.src_target, 'src_target', req.src_sub_path, 'src_sub_path'), place, dstPath);
    const report = contentsReport(place, src.rel, 'folders_entries_move', actorOf(ctx));
    const rename = () => c.fs.rename(place.root, src.look.real, dst.look.real);
    let moved: EntryInfo;
    try {
      // One rename, journaled for the event it owes (committed with the intent's drop; recovery reports a rename made).
      moved = await c.reportedStep(report, { op: 'move', place: c.placeRef(place), from: src.look.real, to: dst.look.real, report }, rename, 'move.renamed');
    } catch (err) {
      // The kernel refuses a folder into itself (changed since the check).
      if (code(err) === 'EINVAL') throw badRequest(`cannot move '${src.rel}' into itself`);
      throw c.endsProblem(err, src, dst);
    }
    ctx.note({ summary: `Moved ${src.rel} to ${dst.rel}`, target: label(place, src.rel), metadata: { to: dst.rel } });
    return { from: ref(src), to: ref(dst), entry: entryOf(path.posix.basename(dst.rel), dst.rel, moved) };
  });
}

export async function deleteEntry(c: FoldersContext, req: ArgsOf<'folders_entries_delete'>, ctx: Call = noNotes): Promise<ResultOf<'folders_entries_delete'>> {
  const sel = c.selector(req.target, req.folder_id, 'folder_id');
  return c.lock.run([sel.key], async () => {
    const place = await sel.resolve();
    const spot = await c.see(c.spot(place, ...c.pathArg(req.target, 'target', req.sub_path, 'sub_path')));
    c.refuseRoot(spot);
    if (!spot.look.entry) throw notFound(`no such file or folder '${spot.rel}'`);
    const entry = entryOf(path.posix.basename(spot.rel), spot.rel, spot.look.entry);
    const report = contentsReport(place, spot.rel, 'folders_entries_delete', actorOf(ctx));
    const unlink = () => c.fs.remove(place.root, spot.look.real);
    try {
      if (entry.type === 'folder') await removeTree(c, place, spot.look.real, report);
      // One unlink: journaled only for the event it owes.
      else await c.reportedStep(report, { op: 'unlink', place: c.placeRef(place), rel: spot.look.real, report }, unlink);
    } catch (err) {
      throw c.problem(err, spot);
    }
    // "subfolder" as at creation: "Deleted folder a/c" read as if a managed folder had gone.
    ctx.note({ summary: `Deleted ${entry.type === 'folder' ? 'subfolder' : entry.type} ${spot.rel}`, target: label(place, spot.rel) });
    return { deleted: ref(spot), entry };
  });
}

/**
 * Removes a folder tree in `place`: renamed aside first (atomic: the entry is gone at once), then removed;
 * if the removal fails, what is left is put back under its name. The journal lets recovery finish it.
 */
async function removeTree(c: FoldersContext, place: Place, real: string, report: FolderReport | undefined): Promise<void> {
  const parent = parentRel(real);
  const trash = `${TRASH_PREFIX}${crypto.randomBytes(6).toString('hex')}`;
  const aside = joinRel(parent, trash);
  let moved = false;
  await c.journal(report).run(
    c.records.entryKey(),
    { op: 'remove', place: c.placeRef(place), parent, trash, entry: real, report },
    async () => {
      await c.fs.rename(place.root, real, aside);
      moved = true;
      await c.pause('remove');
      await c.fs.remove(place.root, aside);
    },
    {
      commit: () => [],
      rollback: async () => {
        if (moved) await c.fs.rename(place.root, aside, real);
      },
    },
  );
}

export async function moveEntries(
  c: FoldersContext,
  req: ArgsOf<'folders_entries_batch_move'>,
  ctx: Call = noNotes,
): Promise<ResultOf<'folders_entries_batch_move'>> {
  if (!Array.isArray(req.moves) || req.moves.length === 0) throw badRequest(`argument 'moves' must list at least one move`);
  // Only target.kind and target.id are used; target.path is ignored (moves are relative to the root).
  const sel = c.selector(req.target, req.folder_id, 'folder_id');
  return c.lock.run([sel.key], async () => {
    const place = await sel.resolve();
    const pairs: Array<{ src: Seen; dst: Seen }> = [];
    // 1. Each pair on its own, against the state before the batch.
    for (const [i, m] of req.moves.entries()) {
      const src = await c.see(c.spot(place, m?.src_sub_path, `moves[${i}].src_sub_path`));
      const dstSpot = c.spot(place, m?.dst_sub_path, `moves[${i}].dst_sub_path`);
      validateNewEntry(dstSpot.rel, dstSpot.arg);
      const dst = await c.see(dstSpot);
      c.refuseRoot(src);
      c.refuseRoot(dst);
      if (!src.look.entry) throw notFound(`no such file or folder '${src.rel}'`);
      if (src.look.entry.type === 'folder' && relStrictlyInside(src.look.real, dst.look.real)) throw badRequest(`cannot move '${src.rel}' into itself`);
      c.requireFreeWithParent(dst);
      pairs.push({ src, dst });
    }
    // 2. The pairs against each other, so that doing them in order gives what step 1 checked.
    for (let i = 0; i < pairs.length; i++) {
      for (let j = 0; j < pairs.length; j++) {
        if (i === j) continue;
        const a = pairs[i];
        const b = pairs[j];
        if (j > i && a.dst.look.real === b.dst.look.real) throw badRequest(`argument 'moves' moves two entries to '${a.dst.rel}'`);
        if (j > i && a.src.look.real === b.src.look.real) throw badRequest(`argument 'moves' moves '${a.src.rel}' twice`);
        if (relStrictlyInside(a.src.look.real, b.src.look.real)) {
          throw badRequest(`argument 'moves' moves both '${a.src.rel}' and '${b.src.rel}', which is inside it`);
        }
        if (relStrictlyInside(a.src.look.real, b.dst.look.real)) {
          throw badRequest(`argument 'moves' puts '${b.dst.rel}' inside '${a.src.rel}', which is moved too`);
        }
      }
    }
    // 3. Do them; on a failure put back what was done (and after a crash, recovery does).
    const done: typeof pairs = [];
    let failing: (typeof pairs)[number] | undefined;
    const report = contentsReport(place, '', 'folders_entries_batch_move', actorOf(ctx));
    const intent: EntryIntent = { op: 'moves', place: c.placeRef(place), pairs: pairs.map((p) => ({ from: p.src.look.real, to: p.dst.look.real })), report };
    try {
      await c.journal(report).run(
        c.records.entryKey(),
        intent,
        async () => {
          for (const p of pairs) {
            failing = p;
            await c.fs.rename(place.root, p.src.look.real, p.dst.look.real);
            done.push(p);
            if (done.length === 1) await c.pause('moves');
          }
        },
        { commit: () => [], rollback: () => everyOne([...done].reverse(), (q) => c.fs.rename(place.root, q.dst.look.real, q.src.look.real)) },
      );
    } catch (err) {
      const p = failing!;
      if (code(err) === 'EINVAL') throw badRequest(`cannot move '${p.src.rel}' into itself`);
      throw c.endsProblem(err, p.src, p.dst);
    }
    const moved = pairs.map((p) => ({ src_sub_path: p.src.rel, dst_sub_path: p.dst.rel }));
    ctx.note({
      summary: `Moved ${moved.length} entr${moved.length === 1 ? 'y' : 'ies'}`,
      target: place.label,
      metadata: { moves: moved },
    });
    return { at: { kind: place.kind, id: place.id, path: '' }, moved };
  });
}
