import type { OperationSpec } from './types.js';
import { arrayOf, bool, dateTime, imageId, int, nullable, object, oneOf, sandboxResources, str, strMap, uint32 } from './schema.js';
import { sandboxView } from './vms-shapes.js';

const count = (description?: string) => int(description, 0);
const resources = () => object({ cpu_cores: count(), memory_mb: count(), disk_gb: count() }, ['cpu_cores', 'memory_mb', 'disk_gb']);

const sandboxId = { id: str('Sandbox ID') };

/** Most bytes one file call moves: its base64 stays within the 1 MiB request and answer bodies. */
export const FILE_PIECE_MAX_BYTES = 512 * 1024;

const CONTROL = '\\u0000-\\u001f\\u007f';

/** A path in the guest: absolute, at most 4096 characters, no control character. It names a guest file only. */
const guestPath = (description: string) =>
  str(description, {
    minLength: 1,
    maxLength: 4096,
    pattern: `^/[^${CONTROL}]*$`,
    'x-expect': 'an absolute path in the guest (at most 4096 characters, no control characters)',
    examples: ['/tmp/example.txt'],
  });

/** A Linux user name as useradd accepts it by default. */
const linuxUser = (description: string) =>
  str(description, {
    maxLength: 32,
    pattern: '^[a-z_][a-z0-9_-]*[$]?$',
    'x-expect': 'a Linux user name (1-32 of [a-z0-9_-], a letter or _ first)',
    examples: ['root'],
  });

const base64 = (description: string, maxBytes: number) =>
  str(description, {
    maxLength: Math.ceil(maxBytes / 3) * 4,
    pattern: '^[A-Za-z0-9+/]*={0,2}$',
    'x-expect': `base64 text of at most ${maxBytes} bytes`,
    examples: ['aGVsbG8K'],
  });

const fileMode = (description: string) => str(description, { pattern: '^[0-7]{3,4}$', 'x-expect': "octal permission bits such as '0644'", examples: ['0644'] });

const pathInfo = {
  type: oneOf(['file', 'directory', 'symlink', 'other'] as const, "What the path is ('symlink' only for a listing's entries: a path itself is followed)"),
  size: count('Bytes'),
  mode: str('Permission bits, four octal digits'),
  mtime: dateTime('Modification time'),
};

export const operations = [
  {
    name: 'sandboxes_list',
    domain: 'sandboxes',
    method: 'GET',
    path: '/sandboxes',
    scopes: ['sandbox.read'],
    hints: ['RO'],
    summary: "List the token's sandboxes.",
    category: 'agent',
    params: {},
    args: {
      labels: strMap('Only sandboxes carrying every pair'),
      include_destroyed: bool('Include tombstones of destroyed sandboxes; hidden by default'),
    },
    result: object({ sandboxes: arrayOf(sandboxView()) }, ['sandboxes']),
  },
  {
    name: 'sandboxes_create',
    domain: 'sandboxes',
    method: 'POST',
    path: '/sandboxes',
    scopes: ['sandbox.manage'],
    hints: [],
    summary: 'Create a sandbox owned by the token.',
    category: 'agent',
    params: {},
    args: {
      image_id: imageId('Image to boot from'),
      name: str(
        "Sandbox name, unique on the host and the guest's hostname: 1-63 of [a-z0-9-], starting and ending with a letter or digit; a friendly two-word name when omitted",
        {
          minLength: 1,
          maxLength: 63,
          pattern: '^[a-z0-9]([a-z0-9-]*[a-z0-9])?$',
        },
      ),
      seed_data: str('Written at /etc/svc/seed before first boot'),
      resources: nullable({ ...sandboxResources(), description: 'CPU, memory and disk; the host default applies for an omitted value' }),
      labels: strMap('Labels'),
      idempotency_key: str('Replaying a create with the same key (same token) returns the sandbox the first call made; 1-256 characters', {
        minLength: 1,
        maxLength: 256,
      }),
      autostart: bool('Restart on host boot; default off'),
    },
    required: ['image_id'],
    result: object({ sandbox: sandboxView(), replayed: bool('The answer of an earlier create with the same idempotency key') }, ['sandbox', 'replayed']),
  },
  {
    name: 'sandboxes_images_list',
    domain: 'sandboxes',
    method: 'GET',
    path: '/sandboxes/images',
    scopes: ['sandbox.read'],
    hints: ['RO'],
    summary: 'List images a sandbox can boot from.',
    category: 'agent',
    params: {},
    args: {},
    result: object(
      {
        images: arrayOf(
          object(
            {
              image_id: str(),
              name: str(),
              kind: oneOf(['image', 'template'] as const),
              storage_id: str(),
              labels: strMap(),
              min_cpu_cores: count(),
              min_memory_mb: count(),
              min_disk_gb: count('Smallest disk a sandbox of it can have'),
              default_resources: resources(),
              default_start: oneOf(['warm', 'cold'] as const, 'How a create with the default resources would start'),
              warm_states: arrayOf(
                object(
                  {
                    warm_state_id: str(),
                    cpu_cores: count(),
                    memory_mb: count(),
                    disk_gb: count(),
                    created_at: dateTime(),
                    resumable: bool(),
                    reason: nullable(str()),
                  },
                  ['warm_state_id', 'cpu_cores', 'memory_mb', 'disk_gb', 'created_at', 'resumable', 'reason'],
                ),
              ),
            },
            [
              'image_id',
              'name',
              'kind',
              'storage_id',
              'labels',
              'min_cpu_cores',
              'min_memory_mb',
              'min_disk_gb',
              'default_resources',
              'default_start',
              'warm_states',
            ],
          ),
        ),
        defaults: resources(),
      },
      ['images', 'defaults'],
    ),
  },
  {
    name: 'sandboxes_get',
    domain: 'sandboxes',
    method: 'GET',
    path: '/sandboxes/{id}',
    scopes: ['sandbox.read'],
    hints: ['RO'],
    summary: "Get one of the token's sandboxes.",
    category: 'agent',
    params: sandboxId,
    args: {},
    result: object({ sandbox: sandboxView() }, ['sandbox']),
  },
  {
    name: 'sandboxes_suspend',
    domain: 'sandboxes',
    method: 'POST',
    path: '/sandboxes/{id}/suspend',
    scopes: ['sandbox.manage'],
    hints: ['IDEM'],
    summary: 'Suspend.',
    category: 'agent',
    params: sandboxId,
    args: {},
    result: object({ sandbox: sandboxView(), already_suspended: bool() }, ['sandbox', 'already_suspended']),
  },
  {
    name: 'sandboxes_resume',
    domain: 'sandboxes',
    method: 'POST',
    path: '/sandboxes/{id}/resume',
    scopes: ['sandbox.manage'],
    hints: ['IDEM'],
    summary: 'Resume a suspended sandbox.',
    category: 'agent',
    params: sandboxId,
    args: {},
    result: object({ sandbox: sandboxView(), already_running: bool() }, ['sandbox', 'already_running']),
  },
  {
    name: 'sandboxes_delete',
    domain: 'sandboxes',
    method: 'DELETE',
    path: '/sandboxes/{id}',
    scopes: ['sandbox.manage'],
    hints: ['IDEM'],
    summary: 'Destroy.',
    category: 'agent',
    params: sandboxId,
    args: {},
    result: object({ sandbox: sandboxView(), already_destroyed: bool() }, ['sandbox', 'already_destroyed']),
  },
  {
    name: 'sandboxes_wait',
    domain: 'sandboxes',
    method: 'POST',
    path: '/sandboxes/{id}/wait',
    scopes: ['sandbox.read'],
    hints: ['RO'],
    summary: 'Wait until running.',
    category: 'agent',
    params: sandboxId,
    args: {
      timeout_seconds: uint32('Seconds to wait before giving up; default 120'),
    },
    result: object({ sandbox: sandboxView(), running: bool(), timed_out: bool(), waited_ms: count(), reason: nullable(str('Why it is not running')) }, [
      'sandbox',
      'running',
      'timed_out',
      'waited_ms',
      'reason',
    ]),
  },
  {
    name: 'sandboxes_exec',
    domain: 'sandboxes',
    method: 'POST',
    path: '/sandboxes/{id}/exec',
    scopes: ['sandbox.manage'],
    hints: ['DEL'],
    summary: 'Run a shell command in a running sandbox (`/bin/sh -c`) and answer when it ends.',
    category: 'agent',
    params: sandboxId,
    args: {
      command: str('Shell command, run as /bin/sh -c in the guest', { minLength: 1, maxLength: 65536 }),
      timeout_seconds: int('Seconds before the command is killed (timed_out); default 60', 1, 86400),
      stdin: str('Input of the command (base64 with encoding base64)', { maxLength: Math.ceil(FILE_PIECE_MAX_BYTES / 3) * 4 }),
      env: {
        type: 'object',
        description: 'Environment variables of the command (names of [A-Za-z0-9_], not starting with a digit or HOSTD_EXEC_; values without NUL)',
        maxProperties: 128,
        propertyNames: {
          maxLength: 256,
          pattern: '^(?!HOSTD_EXEC_)[A-Za-z_][A-Za-z0-9_]*$',
          'x-expect': 'keyed by variable names (1-256 of [A-Za-z0-9_], not starting with a digit or HOSTD_EXEC_)',
        },
        additionalProperties: { type: 'string', maxLength: 32768, pattern: '^[^\\u0000]*$', 'x-expect': 'text without NUL characters' },
        'x-expect': 'at most 128 variables',
      } as unknown as ReturnType<typeof strMap>,
      cwd: guestPath("Directory the command starts in; the user's home when omitted"),
      user: linuxUser('Guest user the command runs as; root when omitted'),
      encoding: oneOf(['utf8', 'base64'] as const, 'utf8 (the default): stdin, stdout and stderr are text; base64: they are base64 of any bytes'),
    },
    required: ['command'],
    result: object(
      {
        exit_code: nullable(int('Exit status; null when the command was killed at the deadline')),
        stdout: str(),
        stderr: str(),
        truncated: bool('A stream was longer than the cap (1 MiB) and was cut'),
        timed_out: bool('The command was killed at timeout_seconds'),
        duration_ms: count(),
      },
      ['exit_code', 'stdout', 'stderr', 'truncated', 'timed_out', 'duration_ms'],
    ),
  },
  {
    name: 'sandboxes_files_get',
    domain: 'sandboxes',
    method: 'GET',
    path: '/sandboxes/{id}/files',
    scopes: ['sandbox.manage'],
    hints: ['RO'],
    summary: 'Read a file of a running sandbox (a piece of at most 512 KiB), or list a directory.',
    category: 'agent',
    params: sandboxId,
    args: {
      path: guestPath('File or directory in the guest'),
      offset: uint32('Byte to start at; default 0'),
      length: int(`Bytes to read; default and at most ${FILE_PIECE_MAX_BYTES}`, 1, FILE_PIECE_MAX_BYTES),
    },
    required: ['path'],
    result: object(
      {
        path: str(),
        ...pathInfo,
        offset: count('Where content starts'),
        content: nullable(str('base64 of the bytes read; null for a directory')),
        eof: nullable(bool('content reaches the end of the file; null for a directory')),
        entries: nullable(
          arrayOf(object({ name: str(), ...pathInfo }, ['name', 'type', 'size', 'mode', 'mtime']), "A directory's entries by name; null for a file"),
        ),
        truncated: bool('The listing was longer than the cap (1 MiB of entries) and was cut'),
      },
      ['path', 'type', 'size', 'mode', 'mtime', 'offset', 'content', 'eof', 'entries', 'truncated'],
    ),
  },
  {
    name: 'sandboxes_files_put',
    domain: 'sandboxes',
    method: 'PUT',
    path: '/sandboxes/{id}/files',
    scopes: ['sandbox.manage'],
    hints: [],
    summary: 'Write (or append to) a file of a running sandbox, making it and its parent directories when missing.',
    category: 'agent',
    params: sandboxId,
    args: {
      path: guestPath('File in the guest'),
      content: base64('The bytes, base64', FILE_PIECE_MAX_BYTES),
      mode: fileMode('Permission bits to set; a new file gets 0644 when omitted, an existing one keeps its own'),
      append: bool('Add to the end instead of replacing the content; default false'),
    },
    required: ['path', 'content'],
    result: object({ path: str(), ...pathInfo, written: count('Bytes written by this call') }, ['path', 'type', 'size', 'mode', 'mtime', 'written']),
  },
  {
    name: 'sandboxes_files_delete',
    domain: 'sandboxes',
    method: 'DELETE',
    path: '/sandboxes/{id}/files',
    scopes: ['sandbox.manage'],
    hints: ['DEL'],
    summary: 'Delete a file, symlink or directory of a running sandbox.',
    category: 'agent',
    params: sandboxId,
    args: {
      path: guestPath('Path in the guest; not /'),
      recursive: bool('Delete a directory with its contents; without it only an empty directory goes'),
    },
    required: ['path'],
    result: object({ path: str(), type: pathInfo.type }, ['path', 'type']),
  },
  {
    name: 'sandboxes_fork',
    domain: 'sandboxes',
    creates: true,
    method: 'POST',
    path: '/sandboxes/{id}/fork',
    scopes: ['sandbox.manage'],
    hints: [],
    summary: 'Copy a running sandbox: its memory and disk are saved once (it runs on) and each copy resumes from them in the background.',
    category: 'agent',
    params: sandboxId,
    args: {
      count: int('How many copies; default 1', 1, 16),
      labels: strMap("Labels of the copies, on top of the parent's"),
      idempotency_key: str('Replaying a fork with the same key (same token) returns the sandboxes the first call made; 1-256 characters', {
        minLength: 1,
        maxLength: 256,
      }),
    },
    result: object(
      {
        parent_id: str('The sandbox copied'),
        sandboxes: arrayOf(sandboxView(), 'The copies, booting'),
        replayed: bool('The answer of an earlier fork with the same idempotency key'),
        save_ms: nullable(count('How long saving the parent took (it is paused for part of it); null for a replay')),
      },
      ['parent_id', 'sandboxes', 'replayed', 'save_ms'],
    ),
  },
] as const satisfies readonly OperationSpec[];
