/**
 * Folder changes on the event stream: one `folders.state` event per managed
 * folder a successful change touched, so that a reader with `files.read`
 * alone (which reads no `activity` event) sees folders appear, change and go
 * (docs/events.md, "What each domain reports"). Written after the change, in
 * its own batch: a crash in between loses that one event, never the change.
 */
import type { ResultOf } from '../../api/registry/index.js';
import type { EventsPort } from '../domain.js';
import type { CallContext } from '../lib/caller.js';
import type { FolderOperation } from './handlers.js';

type Place = { kind: 'folder' | 'connection'; id: string; path: string };
/** What one change did to one folder: the folder record's life, or its contents under `sub_path`. */
export interface FolderChange {
  folder_id: string;
  state: 'created' | 'renamed' | 'deleted' | 'changed';
  name?: string;
  sub_path?: string;
}

const contents = (p: Place): FolderChange[] => (p.kind === 'folder' ? [{ folder_id: p.id, state: 'changed', sub_path: p.path }] : []);

/** The folders a change touched, read from its answer (a connected location's contents are the locations domain's). */
export function changesOf(op: FolderOperation, result: unknown): FolderChange[] {
  switch (op) {
    case 'folders_create': {
      const { folder } = result as ResultOf<'folders_create'>;
      return [{ folder_id: folder.folder_id, state: 'created', name: folder.name }];
    }
    case 'folders_update': {
      const { folder } = result as ResultOf<'folders_update'>;
      return [{ folder_id: folder.folder_id, state: 'renamed', name: folder.name }];
    }
    case 'folders_delete': {
      const { folder } = result as ResultOf<'folders_delete'>;
      return [{ folder_id: folder.folder_id, state: 'deleted', name: folder.name }];
    }
    case 'folders_subfolders_create':
    case 'folders_subfolders_batch_create':
    case 'folders_entries_batch_move':
      return contents((result as { at: Place }).at);
    case 'folders_entries_delete':
      return contents((result as ResultOf<'folders_entries_delete'>).deleted);
    case 'folders_entries_move':
    case 'folders_entries_copy': {
      const r = result as { from: Place; to: Place };
      // A copy leaves its source as it was; a move changes both ends (once when they are the same folder).
      const touched = op === 'folders_entries_copy' ? [r.to] : [r.from, r.to];
      const seen = new Set<string>();
      return touched.flatMap(contents).filter((c) => !seen.has(c.folder_id) && seen.add(c.folder_id));
    }
    default:
      return [];
  }
}

interface Log {
  warn(obj: Record<string, unknown>, msg: string): void;
}

/**
 * Writes the events of one successful change before the call answers (so a
 * caller that saw the answer finds its event). A failure to write one is
 * logged and does not fail the call: the change is made and stored.
 */
export async function reportChanges(events: EventsPort, log: Log, op: FolderOperation, result: unknown, ctx: CallContext): Promise<void> {
  for (const ch of changesOf(op, result)) {
    const data: Record<string, unknown> = { folder_id: ch.folder_id, operation: op };
    if (ch.name !== undefined) data.name = ch.name;
    if (ch.sub_path !== undefined) data.sub_path = ch.sub_path;
    try {
      await events.publishState('folders', `folders/${ch.folder_id}`, ch.state, data, {
        actor: ctx.caller.tokenName,
        summary: ch.state === 'changed' ? `folder ${ch.folder_id} contents changed` : `folder ${ch.name ?? ch.folder_id} ${ch.state}`,
      });
    } catch (err) {
      log.warn({ err: (err as Error).message, folder_id: ch.folder_id, operation: op }, 'folder event not written');
    }
  }
}
