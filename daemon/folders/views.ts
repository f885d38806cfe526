/**
 * What the folders operations answer (their result schemas are in
 * api/registry/folders.ts; docs/folders.md describes them): an entry as the
 * API shows it, and the place a path is in.
 */
import type { ResultOf } from '../../api/registry/index.js';
import type { EntryInfo } from './driver.js';
import type { Place, Spot } from './context.js';

export type Entry = ResultOf<'folders_contents_list'>['entries'][number];
/** A place in a response: which folder or location, and the path inside it. */
export type TargetRef = ResultOf<'folders_contents_list'>['at'];

export function entryOf(name: string, rel: string, e: EntryInfo): Entry {
  return { name, path: rel, type: e.type, size: e.type === 'folder' ? null : e.size, modified: e.mtime.toISOString() };
}

export function byFolderThenName(a: Entry, b: Entry): number {
  const fa = a.type === 'folder' ? 0 : 1;
  const fb = b.type === 'folder' ? 0 : 1;
  if (fa !== fb) return fa - fb;
  return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
}

export function ref(spot: Spot): TargetRef {
  return { kind: spot.place.kind, id: spot.place.id, path: spot.rel };
}

/** An activity target: the place's name, and the path inside it. */
export function label(place: Place, rel: string): string {
  return rel === '' ? place.label : `${place.label}/${rel}`;
}
