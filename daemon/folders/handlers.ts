/**
 * The folders operations as dispatch handlers, typed from the registry:
 * arguments arrive schema-validated (path parameters included under their
 * own names); each operation's file does the rest.
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import { contentsList, search } from './contents.js';
import type { FoldersContext } from './context.js';
import { copyEntry } from './copy.js';
import { deleteEntry, moveEntries, moveEntry } from './entries.js';
import { createFolder, deleteFolder, listFolders, renameFolder } from './folders.js';
import type { FolderOperation } from './records.js';
import { createSubfolder, createSubfolders } from './subfolders.js';

export type { FolderOperation } from './records.js';

/** Each change writes its own `folders.state` event, in the batch that commits it (events.ts). */
export function folderHandlers(c: FoldersContext): HandlersOf<FolderOperation> {
  return {
    folders_list: (args) => listFolders(c, args),
    folders_create: (args, ctx) => createFolder(c, args, ctx),
    folders_update: (args, ctx) => renameFolder(c, args, ctx),
    folders_delete: (args, ctx) => deleteFolder(c, args, ctx),
    folders_contents_list: (args) => contentsList(c, args),
    folders_subfolders_create: (args, ctx) => createSubfolder(c, args, ctx),
    folders_subfolders_batch_create: (args, ctx) => createSubfolders(c, args, ctx),
    folders_entries_move: (args, ctx) => moveEntry(c, args, ctx),
    folders_entries_copy: (args, ctx) => copyEntry(c, args, ctx),
    folders_entries_delete: (args, ctx) => deleteEntry(c, args, ctx),
    folders_search: (args) => search(c, args),
    folders_entries_batch_move: (args, ctx) => moveEntries(c, args, ctx),
  };
}
