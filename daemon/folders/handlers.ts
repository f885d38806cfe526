/**
 * The folders operations as dispatch handlers, typed from the registry:
 * arguments arrive schema-validated (path parameters included under their
 * own names); the service does the rest.
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { DomainOperationName } from '../../api/registry/index.js';
import type { FoldersService } from './service.js';

export type FolderOperation = DomainOperationName<'folders'>;

export function folderHandlers(svc: FoldersService): HandlersOf<FolderOperation> {
  return {
    folders_list: (args) => svc.list(args),
    folders_create: (args, ctx) => svc.create(args, ctx),
    folders_update: (args, ctx) => svc.update(args, ctx),
    folders_delete: (args, ctx) => svc.delete(args, ctx),
    folders_contents_list: (args) => svc.contentsList(args),
    folders_subfolders_create: (args, ctx) => svc.subfoldersCreate(args, ctx),
    folders_subfolders_batch_create: (args, ctx) => svc.subfoldersBatchCreate(args, ctx),
    folders_entries_move: (args, ctx) => svc.entriesMove(args, ctx),
    folders_entries_copy: (args, ctx) => svc.entriesCopy(args, ctx),
    folders_entries_delete: (args, ctx) => svc.entriesDelete(args, ctx),
    folders_search: (args) => svc.search(args),
    folders_entries_batch_move: (args, ctx) => svc.entriesBatchMove(args, ctx),
  };
}
