/**
 * The folders operations as dispatch handlers, typed from the registry:
 * arguments arrive schema-validated (path parameters included under their
 * own names); each operation's file does the rest.
 */
import type { HandlersOf } from '../../api/registry/handlers.js';
import type { DomainOperationName } from '../../api/registry/index.js';
import type { CallContext } from '../lib/caller.js';
import { contentsList, search } from './contents.js';
import type { FoldersContext } from './context.js';
import { copyEntry } from './copy.js';
import { deleteEntry, moveEntries, moveEntry } from './entries.js';
import { createFolder, deleteFolder, listFolders, renameFolder } from './folders.js';
import { createSubfolder, createSubfolders } from './subfolders.js';

export type FolderOperation = DomainOperationName<'folders'>;

/** Told of each successful change (what writes its events); reads are not reported. */
export type AfterChange = (op: FolderOperation, result: unknown, ctx: CallContext) => Promise<void>;

const READS: ReadonlySet<FolderOperation> = new Set(['folders_list', 'folders_contents_list', 'folders_search']);

export function folderHandlers(c: FoldersContext, after?: AfterChange): HandlersOf<FolderOperation> {
  const handlers: HandlersOf<FolderOperation> = {
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
  if (!after) return handlers;
  const wrapped: Record<string, unknown> = {};
  for (const [op, handler] of Object.entries(handlers) as Array<[FolderOperation, (a: any, ctx: CallContext) => Promise<unknown>]>) {
    wrapped[op] = READS.has(op)
      ? handler
      : async (args: any, ctx: CallContext) => {
          const result = await handler(args, ctx);
          await after(op, result, ctx);
          return result;
        };
  }
  return wrapped as HandlersOf<FolderOperation>;
}
