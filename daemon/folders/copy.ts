/**
 * Copying an entry, within a folder or location or from one to another. The
 * copy is made under a temporary name beside its destination and renamed into
 * place only when complete and checked; a crash leaves a temporary entry that
 * recovery removes.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { noNotes } from '../lib/caller.js';
import { badRequest } from '../lib/errors.js';
import { actorOf } from '../lib/operator.js';
import { COPY_PREFIX, type Call, type FoldersContext, type Seen } from './context.js';
import type { EntryInfo } from './driver.js';
import { contentsReport } from './events.js';
import { joinRel, parentRel } from './names.js';
import type { EntryIntent } from './records.js';
import { entryOf, label, ref } from './views.js';

export async function copyEntry(c: FoldersContext, req: ArgsOf<'folders_entries_copy'>, ctx: Call = noNotes): Promise<ResultOf<'folders_entries_copy'>> {
  const srcSel = c.selector(req.src_target, req.src_folder_id, 'src_folder_id');
  const dstSel = req.dst_target
    ? c.selector(req.dst_target, undefined, 'dst_folder_id')
    : req.dst_folder_id
      ? c.selector(null, req.dst_folder_id, 'dst_folder_id')
      : srcSel;
  const dstPath = c.pathArg(req.dst_target, 'dst_target', req.dst_sub_path, 'dst_sub_path');
  // Decision: with a destination named (dst_folder_id or dst_target) but no path, the copy keeps the
  // entry's name at the destination's root (transferEnds). With neither, it would be a copy onto itself.
  if ((dstPath[0] === undefined || dstPath[0] === null) && dstSel === srcSel) throw badRequest(`argument 'dst_sub_path' is required`);
  return c.lock.run([srcSel.key, dstSel.key], async () => {
    const srcPlace = await srcSel.resolve();
    const dstPlace = dstSel === srcSel ? srcPlace : await dstSel.resolve();
    const srcPath = c.pathArg(req.src_target, 'src_target', req.src_sub_path, 'src_sub_path');
    const { src, dst } = await c.transferEnds('copy', srcPlace, srcPath, dstPlace, dstPath);
    // Nothing outside the source may be read: refuse links leaving it, and special files.
    await c.checkTree(src, (sub) => `symlink '${sub}' points outside the ${srcPlace.within}`);
    const parent = parentRel(dst.look.real);
    const temp = `${COPY_PREFIX}${crypto.randomBytes(6).toString('hex')}`;
    const atTemp: Seen = { ...dst, look: { ...dst.look, real: joinRel(parent, temp) } };
    // The destination changes (the source stays as it was): its folder's event is owed.
    const report = contentsReport(dstPlace, dst.rel, 'folders_entries_copy', actorOf(ctx));
    const intent: EntryIntent = { op: 'copy', place: c.placeRef(dstPlace), parent, temp, dest: dst.look.real, report };
    const copied = await c.journal(report).run(
      c.records.entryKey(),
      intent,
      async () => {
        try {
          await c.fs.copy(srcPlace.root, src.look.real, dstPlace.root, atTemp.look.real, (n) => (n === 2 ? c.pause('copy') : undefined));
        } catch (err) {
          throw c.endsProblem(err, src, dst);
        }
        // A link that stayed inside the source may leave the destination once copied (e.g. an absolute
        // link into the source folder, or a relative one copied to a shallower place): undo the copy.
        await c.checkTree(atTemp, (sub) => `symlink '${sub}' would point outside the destination ${dstPlace.within}`, src.rel);
        let placed: EntryInfo;
        try {
          placed = await c.fs.rename(dstPlace.root, atTemp.look.real, dst.look.real);
        } catch (err) {
          throw c.endsProblem(err, dst, dst);
        }
        await c.pause('copy.placed');
        return placed;
      },
      { commit: () => [], rollback: () => c.removeQuietly(dstPlace.root, atTemp.look.real) },
    );
    ctx.note({
      summary: `Copied ${src.rel} to ${label(dstPlace, dst.rel)}`,
      target: label(srcPlace, src.rel),
      metadata: { to: ref(dst) },
    });
    return { from: ref(src), to: ref(dst), entry: entryOf(path.posix.basename(dst.rel), dst.rel, copied) };
  });
}
