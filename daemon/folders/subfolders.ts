/**
 * Subfolders: one made at a path, or several at once (all or none: a batch
 * cut short removes those it made, and after a crash recovery does).
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { noNotes } from '../lib/caller.js';
import { badRequest, conflict } from '../lib/errors.js';
import { actorOf } from '../lib/operator.js';
import { everyOne, type Call, type FoldersContext } from './context.js';
import { FsProblem, type EntryInfo } from './driver.js';
import { contentsReport } from './events.js';
import { joinRel, validateName } from './names.js';
import { entryOf, label, ref } from './views.js';

export async function createSubfolder(
  c: FoldersContext,
  req: ArgsOf<'folders_subfolders_create'>,
  ctx: Call = noNotes,
): Promise<ResultOf<'folders_subfolders_create'>> {
  const name = validateName(req.name, 'name');
  const sel = c.selector(req.target, req.folder_id, 'folder_id');
  return c.lock.run([sel.key], async () => {
    const place = await sel.resolve();
    const parent = c.spot(place, ...c.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
    const rel = joinRel(parent.rel, name);
    const report = contentsReport(place, parent.rel, 'folders_subfolders_create', actorOf(ctx));
    const mkdir = () => c.fs.mkdir(place.root, rel);
    let made: EntryInfo;
    try {
      // One step, journaled for the event it owes (committed with the intent's drop; recovery reports a folder made).
      made = await c.reportedStep(report, { op: 'mkdir', place: c.placeRef(place), rel, report }, mkdir, 'subfolder.made');
    } catch (err) {
      if (err instanceof FsProblem && err.kind === 'exists') throw conflict(`'${rel}' already exists`);
      throw c.problem(err, parent);
    }
    ctx.note({ summary: `Created subfolder ${name}`, target: label(place, rel) });
    return { at: ref(parent), entry: entryOf(name, rel, made) };
  });
}

export async function createSubfolders(
  c: FoldersContext,
  req: ArgsOf<'folders_subfolders_batch_create'>,
  ctx: Call = noNotes,
): Promise<ResultOf<'folders_subfolders_batch_create'>> {
  if (!Array.isArray(req.names) || req.names.length === 0) throw badRequest(`argument 'names' must list at least one name`);
  const names = req.names.map((n, i) => validateName(n, `names[${i}]`));
  const seen = new Set<string>();
  for (const n of names) {
    if (seen.has(n)) throw badRequest(`argument 'names' lists '${n}' twice`);
    seen.add(n);
  }
  const sel = c.selector(req.target, req.folder_id, 'folder_id');
  return c.lock.run([sel.key], async () => {
    const place = await sel.resolve();
    const parent = await c.seeDir(c.spot(place, ...c.pathArg(req.target, 'target', req.sub_path, 'sub_path')));
    for (const n of names) {
      if ((await c.see(c.spot(place, joinRel(parent.rel, n), parent.arg))).look.entry) throw conflict(`'${joinRel(parent.rel, n)}' already exists`);
    }
    const made: EntryInfo[] = [];
    const base = parent.look.real;
    const report = contentsReport(place, parent.rel, 'folders_subfolders_batch_create', actorOf(ctx));
    await c.journal(report).run(
      c.records.entryKey(),
      { op: 'mkdirs', place: c.placeRef(place), parent: base, names, report },
      async () => {
        for (const n of names) {
          try {
            made.push(await c.fs.mkdir(place.root, joinRel(base, n)));
          } catch (err) {
            if (err instanceof FsProblem && err.kind === 'exists') throw conflict(`'${joinRel(parent.rel, n)}' already exists`);
            throw c.problem(err, parent);
          }
          if (made.length === 1) await c.pause('mkdirs');
        }
      },
      {
        commit: () => [],
        // Those already made are removed (still empty: nothing else can have used them yet).
        rollback: () => everyOne(names.slice(0, made.length).reverse(), (n) => c.fs.removeEmptyDir(place.root, joinRel(base, n))),
      },
    );
    const entries = names.map((n, i) => entryOf(n, joinRel(parent.rel, n), made[i]));
    ctx.note({
      summary: `Created ${names.length} subfolder${names.length === 1 ? '' : 's'}`,
      target: label(place, parent.rel),
      metadata: { names },
    });
    return { at: ref(parent), entries };
  });
}
