/**
 * The folders operations as dispatch handlers. Arguments arrive schema-validated
 * (path parameters included under their own names); the service does the rest.
 */
import type { Handler } from '../lib/caller.js';
import type {
  FoldersContentsListRequest,
  FoldersCreateRequest,
  FoldersDeleteRequest,
  FoldersEntriesBatchMoveRequest,
  FoldersEntriesCopyRequest,
  FoldersEntriesDeleteRequest,
  FoldersEntriesMoveRequest,
  FoldersListRequest,
  FoldersSearchRequest,
  FoldersService,
  FoldersSubfoldersBatchCreateRequest,
  FoldersSubfoldersCreateRequest,
  FoldersUpdateRequest,
} from './service.js';

export type FolderOperation =
  | 'folders_list'
  | 'folders_create'
  | 'folders_update'
  | 'folders_delete'
  | 'folders_contents_list'
  | 'folders_subfolders_create'
  | 'folders_subfolders_batch_create'
  | 'folders_entries_move'
  | 'folders_entries_copy'
  | 'folders_entries_delete'
  | 'folders_search'
  | 'folders_entries_batch_move';

export function folderHandlers(svc: FoldersService): Record<FolderOperation, Handler> {
  return {
    folders_list: (args) => svc.list(args as FoldersListRequest),
    folders_create: (args, ctx) => svc.create(args as FoldersCreateRequest, ctx),
    folders_update: (args, ctx) => svc.update(args as FoldersUpdateRequest, ctx),
    folders_delete: (args, ctx) => svc.delete(args as FoldersDeleteRequest, ctx),
    folders_contents_list: (args) => svc.contentsList(args as FoldersContentsListRequest),
    folders_subfolders_create: (args, ctx) => svc.subfoldersCreate(args as FoldersSubfoldersCreateRequest, ctx),
    folders_subfolders_batch_create: (args, ctx) => svc.subfoldersBatchCreate(args as FoldersSubfoldersBatchCreateRequest, ctx),
    folders_entries_move: (args, ctx) => svc.entriesMove(args as FoldersEntriesMoveRequest, ctx),
    folders_entries_copy: (args, ctx) => svc.entriesCopy(args as FoldersEntriesCopyRequest, ctx),
    folders_entries_delete: (args, ctx) => svc.entriesDelete(args as FoldersEntriesDeleteRequest, ctx),
    folders_search: (args) => svc.search(args as FoldersSearchRequest),
    folders_entries_batch_move: (args, ctx) => svc.entriesBatchMove(args as FoldersEntriesBatchMoveRequest, ctx),
  };
}
