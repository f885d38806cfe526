import { INTERNAL_PREFIX, LEGACY_INTERNAL_NAMES } from '../../daemon/lib/host-paths.js';
import type { OperationSpec, Schema } from './types.js';
import { str, int, bool, oneOf, object, dateTime, nullable, target, arrayOf, type MovePair } from './schema.js';

const folderId = { folder_id: str('Folder ID') };

/** C0 and C1 control characters, DEL, and lone UTF-16 surrogates (patterns run with the `u` flag). */
const CONTROL = '\\u0000-\\u001f\\u007f-\\u009f\\uD800-\\uDFFF';
/** Pattern text matching `lit` in any ASCII case (JSON Schema has no `i` flag). */
const anyCase = (lit: string) =>
  [...lit].map((c) => (/[a-z]/i.test(c) ? `[${c.toLowerCase()}${c.toUpperCase()}]` : c.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))).join('');

/**
 * A name the API creates (folder, subfolder): not empty, not '.' or '..', no
 * '/', no '\\', no control character (C0, DEL, C1: SMB clients and most tools
 * cannot use them), no unpaired surrogate. The server also refuses names over
 * 255 bytes of UTF-8, which a schema cannot count (daemon/folders/names.ts
 * `validateName`).
 */
export const NAME_PATTERN = `^[^/\\\\${CONTROL}]+$`;
const NAME_RULE = "a name of 1-255 bytes of UTF-8 without control characters, '/' or '\\', not '.' or '..'";
const RESERVED_RULE = `not ${LEGACY_INTERNAL_NAMES.map((n) => `'${n}'`).join(' or ')} and not starting with '${INTERNAL_PREFIX}', in any case (hostd's own directories)`;

/** A subfolder's name, or any name the API creates inside a folder. */
const entryName = (description: string): Schema<string> =>
  str(description, {
    minLength: 1,
    maxLength: 255,
    pattern: NAME_PATTERN,
    allOf: [{ not: { enum: ['.', '..'] } }],
    'x-expect': NAME_RULE,
    examples: ['example'],
  });

/**
 * A folder's name: also not one of the directories every domain keeps in a
 * pool (daemon/lib/host-paths.ts, the one list), in any ASCII case. The server
 * compares after NFKC too (`isInternalName`), which a pattern cannot say.
 */
const folderName = (description: string): Schema<string> =>
  str(description, {
    minLength: 1,
    maxLength: 255,
    pattern: NAME_PATTERN,
    allOf: [
      { not: { enum: ['.', '..'] } },
      { not: { pattern: `^${anyCase(INTERNAL_PREFIX)}` } },
      ...LEGACY_INTERNAL_NAMES.map((n) => ({ not: { pattern: `^${anyCase(n)}$` } })),
    ],
    'x-expect': `${NAME_RULE}, ${RESERVED_RULE}`,
    examples: ['example'],
  });

const PATH_RULE = "relative to the root, '/'-separated; no '..' segment, leading '/', '\\' or NUL";

/** A move pair: both paths name an entry, never the root. */
const movePair = (): Schema<MovePair> =>
  ({
    type: 'object',
    properties: {
      src_sub_path: str(`Entry to move, ${PATH_RULE}`, { minLength: 1 }),
      dst_sub_path: str(`Its new full path, ${PATH_RULE}; the new name without control characters`, { minLength: 1 }),
    },
    required: ['src_sub_path', 'dst_sub_path'],
    additionalProperties: false,
  }) as Schema<MovePair>;

// Result pieces (daemon/folders/views.ts, records.ts Folder)

/** A managed folder record. */
const folder = () =>
  object(
    {
      folder_id: str('Folder ID'),
      name: str('Folder name'),
      storage_id: str('Pool it lives in'),
      path: str('Absolute directory on the host'),
      created_at: dateTime(),
    },
    ['folder_id', 'name', 'storage_id', 'path', 'created_at'],
    { title: 'Folder' },
  );

/** A file or folder as an answer shows it. */
const entry = () =>
  object(
    {
      name: str('Entry name'),
      path: str("Relative to the folder (or location) root, '/'-separated"),
      type: oneOf(['file', 'folder', 'symlink', 'other'] as const),
      size: nullable(int('Bytes (for a symlink, the length of its text); null for folders', 0)),
      modified: dateTime('Modification time'),
    },
    ['name', 'path', 'type', 'size', 'modified'],
    { title: 'FolderEntry' },
  );

/** Which folder or location, and the path inside it. */
const placeRef = (description?: string) =>
  object(
    {
      kind: oneOf(['folder', 'connection'] as const),
      id: str('Folder ID or location ID'),
      path: str("Path inside it, '/'-separated; empty is the root"),
    },
    ['kind', 'id', 'path'],
    { description },
  );

export const operations = [
  {
    name: 'folders_list',
    domain: 'folders',
    method: 'GET',
    path: '/folders',
    scopes: ['files.read'],
    hints: ['RO'],
    summary: 'List managed folders.',
    category: 'file',
    params: {},
    args: {},
    result: object({ folders: arrayOf(folder(), 'Every managed folder, by name then pool') }, ['folders']),
  },
  {
    name: 'folders_create',
    domain: 'folders',
    method: 'POST',
    path: '/folders',
    scopes: ['files.manage'],
    hints: [],
    summary: 'Create a folder in a pool.',
    category: 'storage',
    params: {},
    args: {
      storage_id: str('Pool to create the folder in'),
      name: folderName('Folder name'),
    },
    required: ['storage_id', 'name'],
    result: object({ folder: folder() }, ['folder']),
  },
  {
    name: 'folders_update',
    domain: 'folders',
    method: 'PATCH',
    path: '/folders/{folder_id}',
    scopes: ['files.manage'],
    hints: [],
    summary: 'Rename a folder.',
    category: 'storage',
    params: folderId,
    args: {
      new_name: folderName('New folder name'),
    },
    required: ['new_name'],
    result: object({ folder: folder() }, ['folder']),
  },
  {
    name: 'folders_delete',
    domain: 'folders',
    method: 'DELETE',
    path: '/folders/{folder_id}',
    scopes: ['files.manage'],
    hints: ['DEL'],
    summary: 'Delete a folder.',
    category: 'storage',
    params: folderId,
    args: {},
    result: object(
      {
        folder: folder(),
        deleted: bool('Always true'),
        directory_kept: bool("Present (true) when the folder's directory was left on disk"),
      },
      ['folder', 'deleted'],
    ),
  },
  {
    name: 'folders_contents_list',
    domain: 'folders',
    method: 'GET',
    path: '/folders/{folder_id}/contents',
    scopes: ['files.read'],
    hints: ['RO'],
    summary: 'List entries at a path.',
    category: 'file',
    params: folderId,
    args: {
      sub_path: str(`Path inside the folder, ${PATH_RULE}; empty is the root`),
      target: nullable(target('Folder or connected location to list; overrides folder_id and sub_path')),
    },
    result: object(
      {
        at: placeRef('What was listed'),
        entries: arrayOf(entry(), 'Folders first, then by name'),
        truncated: bool("Whether the listing stopped at the daemon's limit"),
      },
      ['at', 'entries', 'truncated'],
    ),
  },
  {
    name: 'folders_subfolders_create',
    domain: 'folders',
    method: 'POST',
    path: '/folders/{folder_id}/subfolders',
    scopes: ['files.manage'],
    hints: [],
    summary: 'Create a subfolder.',
    category: 'file',
    params: folderId,
    args: {
      name: entryName('Subfolder name'),
      sub_path: str(`Parent inside the folder, ${PATH_RULE}; empty is the root`),
      target: nullable(target('Parent to create in; overrides folder_id and sub_path')),
    },
    required: ['name'],
    result: object({ at: placeRef('The parent'), entry: entry() }, ['at', 'entry']),
  },
  {
    name: 'folders_subfolders_batch_create',
    domain: 'folders',
    method: 'POST',
    path: '/folders/{folder_id}/subfolders/batch',
    scopes: ['files.manage'],
    hints: [],
    summary: 'Create several subfolders.',
    category: 'file',
    params: folderId,
    args: {
      names: arrayOf(entryName('Subfolder name'), 'Subfolder names, each once', { minItems: 1, uniqueItems: true }),
      sub_path: str(`Parent inside the folder, ${PATH_RULE}; empty is the root`),
      target: nullable(target('Parent to create in; overrides folder_id and sub_path')),
    },
    required: ['names'],
    result: object({ at: placeRef('The parent'), entries: arrayOf(entry(), 'The subfolders made') }, ['at', 'entries']),
  },
  {
    name: 'folders_entries_move',
    domain: 'folders',
    method: 'PATCH',
    path: '/folders/{folder_id}/entries/{src_sub_path}',
    scopes: ['files.manage'],
    hints: [],
    summary: 'Move or rename a file or folder.',
    category: 'file',
    params: { ...folderId, src_sub_path: str('Path of the entry inside the folder') },
    args: {
      dst_sub_path: str(
        `New full path of the entry inside the folder, ${PATH_RULE}; the new name without control characters. Required unless dst_target.path is given`,
      ),
      src_target: nullable(target('Source folder or connected location; overrides folder_id and src_sub_path')),
      dst_target: nullable(target('Destination; same folder or connection as the source; pair with src_target')),
    },
    result: object({ from: placeRef('Where the entry was'), to: placeRef('Where it is now'), entry: entry() }, ['from', 'to', 'entry']),
  },
  {
    name: 'folders_entries_copy',
    domain: 'folders',
    method: 'POST',
    path: '/folders/{src_folder_id}/entries/{src_sub_path}/copy',
    scopes: ['files.manage'],
    hints: [],
    summary: 'Copy a file or folder.',
    category: 'file',
    params: {
      src_folder_id: str('Source folder ID'),
      src_sub_path: str('Path of the entry inside the source folder'),
    },
    args: {
      dst_folder_id: str('Destination folder ID; omitted (and no dst_target): the source folder or location'),
      dst_sub_path: str(
        `Path of the copy inside the destination, ${PATH_RULE}; the new name without control characters. ` +
          "Omitted (and no dst_target.path): the source entry's name at the destination root when dst_folder_id or dst_target names the destination; required otherwise",
      ),
      src_target: nullable(target('Source folder or connected location; overrides src_folder_id and src_sub_path')),
      dst_target: nullable(target('Destination folder or connected location; overrides dst_folder_id and dst_sub_path')),
    },
    result: object({ from: placeRef('The source'), to: placeRef('The copy'), entry: entry() }, ['from', 'to', 'entry']),
  },
  {
    name: 'folders_entries_delete',
    domain: 'folders',
    method: 'DELETE',
    path: '/folders/{folder_id}/entries/{sub_path}',
    scopes: ['files.manage'],
    hints: ['DEL'],
    summary: 'Delete a file or folder.',
    category: 'file',
    params: { ...folderId, sub_path: str('Path of the entry inside the folder') },
    args: {
      target: nullable(target('Entry to delete; overrides folder_id and sub_path')),
    },
    result: object({ deleted: placeRef('What was deleted'), entry: entry() }, ['deleted', 'entry']),
  },
  {
    name: 'folders_search',
    domain: 'folders',
    method: 'GET',
    path: '/folders/{folder_id}/search',
    scopes: ['files.read'],
    hints: ['RO'],
    summary: 'Search by name.',
    category: 'file',
    params: folderId,
    args: {
      pattern: str('Case-insensitive substring; * acts as a glob wildcard', { minLength: 1 }),
      sub_path: str(`Start point inside the folder, ${PATH_RULE}; empty is the root`),
      target: nullable(target('Folder or connected location to search; overrides folder_id and sub_path')),
    },
    required: ['pattern'],
    result: object(
      {
        at: placeRef('Where the search started'),
        pattern: str('The pattern searched for'),
        matches: arrayOf(entry()),
        truncated: bool("Whether the search stopped at the daemon's limit"),
      },
      ['at', 'pattern', 'matches', 'truncated'],
    ),
  },
  {
    name: 'folders_entries_batch_move',
    domain: 'folders',
    method: 'POST',
    path: '/folders/{folder_id}/entries/batch',
    scopes: ['files.manage'],
    hints: ['DEL'],
    summary: 'Move several entries.',
    category: 'file',
    params: folderId,
    args: {
      moves: arrayOf(movePair(), 'Moves, relative to the folder or connection root, done in order', { minItems: 1 }),
      target: nullable(target('Folder or connected location; only kind and id are used; overrides folder_id')),
    },
    required: ['moves'],
    result: object(
      {
        at: placeRef('The folder or location (path empty)'),
        moved: arrayOf(
          object({ src_sub_path: str('Where the entry was'), dst_sub_path: str('Where it is now') }, ['src_sub_path', 'dst_sub_path']),
          'The moves done, in order',
        ),
      },
      ['at', 'moved'],
    ),
  },
] as const satisfies readonly OperationSpec[];
