/**
 * Browsing a folder or a connected location: the entries at a path, and a
 * search by name below it. Neither changes anything, so neither takes a lock.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { badRequest } from '../lib/errors.js';
import type { FoldersContext } from './context.js';
import { joinRel } from './names.js';
import { byFolderThenName, entryOf, ref } from './views.js';

export async function contentsList(c: FoldersContext, req: ArgsOf<'folders_contents_list'>): Promise<ResultOf<'folders_contents_list'>> {
  const place = await c.place(req.target, req.folder_id, 'folder_id');
  const spot = c.spot(place, ...c.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
  let listed;
  try {
    listed = await c.fs.list(place.root, spot.rel, c.listLimit);
  } catch (err) {
    throw c.problem(err, spot);
  }
  const entries = listed.entries.map((e) => entryOf(e.name, joinRel(spot.rel, e.name), e));
  entries.sort(byFolderThenName);
  return { at: ref(spot), entries, truncated: listed.truncated };
}

export async function search(c: FoldersContext, req: ArgsOf<'folders_search'>): Promise<ResultOf<'folders_search'>> {
  if (typeof req.pattern !== 'string' || req.pattern === '') throw badRequest(`argument 'pattern' must not be empty`);
  const match = nameMatcher(req.pattern);
  const place = await c.place(req.target, req.folder_id, 'folder_id');
  const start = c.spot(place, ...c.pathArg(req.target, 'target', req.sub_path, 'sub_path'));
  let found;
  try {
    found = await c.fs.search(place.root, start.rel, match, c.searchLimit);
  } catch (err) {
    throw c.problem(err, start);
  }
  const matches = found.hits.map((h) => entryOf(h.name, joinRel(start.rel, h.path), h.entry));
  return { at: ref(start), pattern: req.pattern, matches, truncated: found.truncated };
}

/**
 * '*' is a glob over the whole name; otherwise a substring. Both
 * case-insensitive (both sides lowercased). The glob is matched run by run:
 * the text before the first '*' is a prefix, the text after the last a
 * suffix, and each run between them is found leftmost after the previous one
 * (which is exact when '*' is the only wildcard). Each name costs a few
 * substring searches: a regular expression of many '.*' would backtrack
 * without bound on a long name (`a*a*a*a*a*b` against 255 'a's runs for
 * hours), and it would run on the daemon's only thread.
 */
export function nameMatcher(pattern: string): (name: string) => boolean {
  const p = pattern.toLowerCase();
  if (!p.includes('*')) return (name) => name.toLowerCase().includes(p);
  const runs = p.split('*');
  const first = runs[0];
  const last = runs[runs.length - 1];
  const middle = runs.slice(1, -1).filter((r) => r !== '');
  return (name) => {
    const n = name.toLowerCase();
    if (n.length < first.length + last.length || !n.startsWith(first) || !n.endsWith(last)) return false;
    const end = n.length - last.length;
    let at = first.length;
    for (const m of middle) {
      const i = n.indexOf(m, at);
      if (i < 0 || i + m.length > end) return false;
      at = i + m.length;
    }
    return true;
  };
}
