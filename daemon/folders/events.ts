/**
 * Folder changes on the event stream: one `folders.state` event per managed
 * folder a successful change touched, so that a reader with `files.read`
 * alone (which reads no `activity` event) sees folders appear, change and go
 * (docs/events.md, "What each domain reports").
 *
 * A folder's change is files on disk, so its event cannot share a batch with
 * the change itself; it shares one with the change's commit. Every change
 * that owes an event runs through the intent journal, and its intent names
 * the event it owes (`report`): the intent is stored before the disk is
 * touched, and the journal's commit writes the event with the intent's drop
 * (and the folder's record, for a create, rename or delete) in one synced
 * batch (`committing`). A crash after the disk changed and before that
 * commit leaves the intent open: recovery at the next start sees from the
 * disk whether the change was made, and writes the event it owes with the
 * intent's drop when it was (`data.reason: 'found-at-open'`, still named by
 * the caller), none when it undid it (`settled`). So an event is neither
 * lost nor written twice, and never written for a change that did not
 * happen.
 */
import type { EventsPort, StateEventOpts } from '../domain.js';
import { writeWithState } from '../events/state.js';
import type { JournalDb, JournalOp } from '../lib/journal.js';
import { SYNC, type BatchOp, type Store } from '../store/store.js';
import type { Folder, FolderOperation, FolderReport } from './records.js';

/** A managed folder's own change (create, rename, delete). */
export function recordReport(rec: Folder, state: 'created' | 'renamed' | 'deleted', operation: FolderOperation, actor: string): FolderReport {
  return { actor, operation, change: { folder_id: rec.folder_id, state, name: rec.name } };
}

/** A change of a place's contents at `rel`; none in a connected location (its contents are the locations domain's). */
export function contentsReport(place: { kind: string; id: string }, rel: string, operation: FolderOperation, actor: string): FolderReport | undefined {
  if (place.kind !== 'folder') return undefined;
  return { actor, operation, change: { folder_id: place.id, state: 'changed', sub_path: rel } };
}

function eventOf(r: FolderReport, found: boolean): { domain: string; resource: string; state: string; data: Record<string, unknown> } & StateEventOpts {
  const ch = r.change;
  const data: Record<string, unknown> = { folder_id: ch.folder_id, operation: r.operation };
  if (ch.name !== undefined) data.name = ch.name;
  if (ch.sub_path !== undefined) data.sub_path = ch.sub_path;
  if (found) data.reason = 'found-at-open';
  return {
    domain: 'folders',
    resource: `folders/${ch.folder_id}`,
    state: ch.state,
    data,
    actor: r.actor,
    summary: ch.state === 'changed' ? `folder ${ch.folder_id} contents changed` : `folder ${ch.name ?? ch.folder_id} ${ch.state}`,
  };
}

/** A port that reports nothing (a domain opened without the event stream). */
export const NO_EVENTS: EventsPort = { publishState: async () => undefined };

/** Where the folders domain writes its events: the port, and the store their batches go to. */
export interface FolderEvents {
  port: EventsPort;
  store: Store;
}

/** Writes `ops` (a commit) with the event `report` owes, in one synced batch; alone when it owes none. */
function write(ev: FolderEvents, ops: JournalOp[], report: FolderReport | undefined, found: boolean): Promise<void> {
  if (!report) return ev.store.batch(ops as BatchOp[], SYNC);
  return writeWithState(ev.port, ev.store, ops as BatchOp[], eventOf(report, found));
}

/** The journal's writer for a call's change: its commit carries the event the change owes. */
export function committing(ev: FolderEvents, report: FolderReport | undefined): JournalDb {
  return { batch: (ops) => write(ev, ops, report, false) };
}

/**
 * The journal's writer for recovery: a commit carries the event of its
 * intent when `settle` found the change made (`owed`, by intent key, set
 * just before the commit), and none when it undid it.
 */
export function settled(ev: FolderEvents, owed: Map<string, FolderReport>, keyOf: (ops: JournalOp[]) => string | undefined): JournalDb {
  return {
    batch: (ops) => {
      const key = keyOf(ops);
      const report = key === undefined ? undefined : owed.get(key);
      if (key !== undefined) owed.delete(key);
      return write(ev, ops, report, true);
    },
  };
}
