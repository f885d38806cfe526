import type { OperationSpec, Schema } from './types.js';
import { arrayOf, bool, containerPath, dateTime, int, nullable, object, oneOf, resourceName, str, taskRecord } from './schema.js';

const appId = { app_id: str('App ID') };

/** A fractional number (percentages); the shared builders have integers only. */
const num = (description: string): Schema<number> => ({ type: 'number', description }) as Schema<number>;

/** The one value `true` (an uninstall's `deleted`). */
const alwaysTrue = (description: string): Schema<true> => ({ type: 'boolean', const: true, description }) as Schema<true>;

/** A folder assignment as install and PATCH /apps/{app_id}/folders take it (the spec's shape). */
const folderAssignment = () =>
  object(
    {
      folder_id: str('Managed folder to mount'),
      container_path: containerPath("Mount point inside the app's containers"),
      sub_path: str('Directory inside the folder, relative to it (default: the folder itself)'),
      mount_point_id: str('A data folder of the template, or a service of the app (default: every service)'),
      read_only: bool("Mount read-only (default: the template data folder's setting, else false)"),
    },
    ['folder_id', 'container_path'],
    { title: 'FolderAssignment' },
  );

/** A folder assignment as an app's view shows it: as it was given (an older version may have stored what the rules refuse now). */
const storedAssignment = () =>
  object(
    {
      folder_id: str(),
      container_path: str(),
      sub_path: str(),
      mount_point_id: str(),
      read_only: bool(),
    },
    ['folder_id', 'container_path'],
  );

const portBinding = () =>
  object(
    {
      host_ip: str('Host address the port is published on (empty or a wildcard: every address)'),
      host_port: int('Host port', 0, 65535),
      container_port: int('Port inside the container', 0, 65535),
      protocol: str('tcp, udp or sctp'),
    },
    ['host_ip', 'host_port', 'container_port', 'protocol'],
  );

export const APP_STATES = ['installing', 'moving', 'updating', 'running', 'stopped', 'partial', 'not_created', 'unknown'] as const;

/** An app as every answer shows it (docs/apps.md, "Endpoints, shapes and decisions"). */
const appView = () =>
  object(
    {
      app_id: str('App id, made from the name'),
      name: str('Name as given'),
      template_id: str("Template it was installed from, or 'custom'"),
      storage_id: str("Pool holding the app's data"),
      data_dir: str("The app's data directory: <pool>/.hostd-apps/<app_id>"),
      project: str('Compose project on the engine'),
      state: oneOf(
        APP_STATES,
        'installing, moving, updating (a change pulling images), running (every container), stopped (none), partial, not_created (no containers), unknown (engine not reachable)',
      ),
      desired_state: oneOf(['running', 'stopped'] as const, 'What the last action asked for; updates and moves keep a stopped app stopped'),
      services: arrayOf(
        object(
          {
            service: str('Compose service'),
            container_id: str(),
            name: str('Container name'),
            image: str(),
            state: str("The engine's state: created, running, paused, restarting, removing, exited, dead"),
            status: str("The engine's words, e.g. 'Up 3 minutes'"),
            generation: nullable(int('Generation of the definition the container was made from', 0)),
          },
          ['service', 'container_id', 'name', 'image', 'state', 'status', 'generation'],
        ),
        'Containers of the project, by service',
      ),
      ports: arrayOf(
        object(
          {
            service: str('Compose service'),
            host_ip: str('Host address the port is published on'),
            host_port: int('Host port', 0, 65535),
            container_port: int('Port inside the container', 0, 65535),
            protocol: str('tcp, udp or sctp'),
          },
          ['service', 'host_ip', 'host_port', 'container_port', 'protocol'],
        ),
        'Published ports',
      ),
      folder_assignments: arrayOf(storedAssignment()),
      compose_sha256: str('SHA-256 of the compose content as given (the content itself is never returned)'),
      generation: int('Bumped by every change of the definition; carried by the containers', 1),
      task_id: nullable(str('The install or move task running for it')),
      refused: nullable(str('Why hostd refuses to start or apply the stored compose file (a rule added since it was installed)')),
      created_at: dateTime(),
      updated_at: dateTime(),
    },
    [
      'app_id',
      'name',
      'template_id',
      'storage_id',
      'data_dir',
      'project',
      'state',
      'desired_state',
      'services',
      'ports',
      'folder_assignments',
      'compose_sha256',
      'generation',
      'task_id',
      'refused',
      'created_at',
      'updated_at',
    ],
    { title: 'App' },
  );

/** An app and the task a change started (null when it was done at once). */
const appAndTask = () => object({ app: appView(), task: nullable(taskRecord()) }, ['app', 'task']);

const template = () =>
  object(
    {
      template_id: str('Template id (its file name)'),
      name: str(),
      description: str(),
      source: oneOf(['bundled', 'directory'] as const, 'Bundled with hostd, or a file of apps.templates_dir'),
      default_name: str('App name used when the install gives none'),
      ports: arrayOf(
        object(
          {
            name: str('Variable the compose file uses for the host port'),
            container_port: int(undefined, 1, 65535),
            protocol: oneOf(['tcp', 'udp'] as const),
            default: int('Preferred host port', 1, 65535),
            description: str(),
          },
          ['name', 'container_port', 'protocol', 'default', 'description'],
        ),
      ),
      data_folders: arrayOf(
        object(
          {
            id: str("What a folder assignment's mount_point_id names"),
            service: str(),
            container_path: str(),
            read_only: bool(),
            description: str(),
          },
          ['id', 'service', 'container_path', 'read_only', 'description'],
        ),
      ),
      images: arrayOf(str()),
      services: arrayOf(str()),
      compose: str("The compose file, with ${VARIABLE} references to its parameters and hostd's variables"),
    },
    ['template_id', 'name', 'description', 'source', 'default_name', 'ports', 'data_folders', 'images', 'services', 'compose'],
    { title: 'AppTemplate' },
  );

const containerStats = () =>
  object(
    {
      cpu_percent: num('CPU use as docker stats shows it (100 is one CPU)'),
      cpu_total_ns: int('CPU time used so far, in nanoseconds', 0),
      online_cpus: int(undefined, 1),
      memory: object(
        {
          usage_bytes: int('In use, without page cache that can be dropped', 0),
          limit_bytes: int(undefined, 0),
          percent: num('usage_bytes of limit_bytes, in percent'),
        },
        ['usage_bytes', 'limit_bytes', 'percent'],
      ),
      network: object(
        {
          rx_bytes: int(undefined, 0),
          tx_bytes: int(undefined, 0),
          rx_packets: int(undefined, 0),
          tx_packets: int(undefined, 0),
        },
        ['rx_bytes', 'tx_bytes', 'rx_packets', 'tx_packets'],
      ),
      block_io: object({ read_bytes: int(undefined, 0), write_bytes: int(undefined, 0) }, ['read_bytes', 'write_bytes']),
      pids: int(undefined, 0),
      read_at: dateTime('When the engine read them'),
    },
    ['cpu_percent', 'cpu_total_ns', 'online_cpus', 'memory', 'network', 'block_io', 'pids', 'read_at'],
  );

export const operations = [
  {
    name: 'apps_list',
    domain: 'apps',
    method: 'GET',
    path: '/apps',
    scopes: ['apps.read'],
    hints: ['RO'],
    summary: 'List installed apps.',
    category: 'app',
    params: {},
    args: {},
    result: object({ apps: arrayOf(appView()) }, ['apps']),
  },
  {
    name: 'apps_create',
    domain: 'apps',
    method: 'POST',
    path: '/apps',
    scopes: ['apps.manage'],
    hints: [],
    summary: 'Install an app.',
    category: 'app',
    params: {},
    args: {
      template_id: str("App template to install (GET /apps/templates), or 'custom' with compose_content", { minLength: 1 }),
      name: resourceName('App name (the app id is made from it); default: the template default name', { max: 64 }),
      storage_id: str('Pool for app data'),
      folder_assignments: nullable(arrayOf(folderAssignment(), 'Folder mounts for the app')),
      compose_content: str("Custom compose content (YAML) for template_id 'custom'", { minLength: 1 }),
    },
    required: ['template_id'],
    result: appAndTask(),
  },
  {
    name: 'apps_templates_list',
    domain: 'apps',
    method: 'GET',
    path: '/apps/templates',
    scopes: ['apps.read'],
    hints: ['RO'],
    summary: 'List apps available to install.',
    category: 'app',
    params: {},
    args: {},
    result: object(
      {
        templates: arrayOf(template()),
        invalid: arrayOf(
          object({ file: str('Template file'), error: str('Why it is not offered') }, ['file', 'error']),
          'Files of apps.templates_dir that are not valid templates',
        ),
      },
      ['templates', 'invalid'],
    ),
  },
  {
    name: 'apps_discovered_list',
    domain: 'apps',
    method: 'GET',
    path: '/apps/discovered',
    scopes: ['apps.read'],
    hints: ['RO'],
    summary: 'List unmanaged containers found on the host.',
    category: 'app',
    params: {},
    args: {},
    result: object(
      {
        containers: arrayOf(
          object(
            {
              container_id: str(),
              name: str('Container name'),
              image: str(),
              state: str("The engine's state"),
              status: str("The engine's words"),
              created_at: dateTime(),
              project: nullable(str('Compose project, when the container belongs to one')),
              service: nullable(str('Compose service')),
              ports: arrayOf(portBinding(), 'Published ports'),
            },
            ['container_id', 'name', 'image', 'state', 'status', 'created_at', 'project', 'service', 'ports'],
          ),
          'Containers on the engine that no app owns, by name',
        ),
      },
      ['containers'],
    ),
  },
  {
    name: 'apps_delete',
    domain: 'apps',
    method: 'DELETE',
    path: '/apps/{app_id}',
    scopes: ['apps.manage'],
    hints: ['DEL'],
    summary: 'Uninstall an app.',
    category: 'app',
    params: appId,
    args: {},
    result: object(
      {
        app_id: str(),
        deleted: alwaysTrue('Always true'),
        data_dir: str('The data directory that was removed'),
        folders_kept: arrayOf(str(), 'Managed folders the app mounted: never removed'),
      },
      ['app_id', 'deleted', 'data_dir', 'folders_kept'],
    ),
  },
  {
    name: 'apps_actions',
    domain: 'apps',
    method: 'POST',
    path: '/apps/{app_id}/actions',
    scopes: ['apps.manage'],
    hints: ['IDEM'],
    summary: 'Start, stop or restart.',
    category: 'app',
    params: appId,
    args: {
      action: oneOf(['start', 'stop', 'restart'], 'Action to run'),
    },
    required: ['action'],
    result: object({ app: appView(), action: oneOf(['start', 'stop', 'restart'] as const, 'The action that ran') }, ['app', 'action']),
  },
  {
    name: 'apps_logs',
    domain: 'apps',
    method: 'GET',
    path: '/apps/{app_id}/logs',
    scopes: ['apps.read'],
    hints: ['RO'],
    summary: 'Get container logs.',
    category: 'app',
    params: appId,
    args: {
      tail: int('Number of trailing lines to return, at most 10000 (default 100)', 0, 10000),
    },
    result: object(
      {
        app_id: str(),
        tail: int('Lines asked for', 0, 10000),
        lines: arrayOf(
          object(
            {
              service: str('Compose service'),
              container: str('Container name'),
              time: str('When the engine received the line (RFC 3339); empty when it has no time'),
              stream: oneOf(['stdout', 'stderr'] as const),
              text: str(),
            },
            ['service', 'container', 'time', 'stream', 'text'],
          ),
          'The last lines of every container, oldest first',
        ),
      },
      ['app_id', 'tail', 'lines'],
    ),
  },
  {
    name: 'apps_stats',
    domain: 'apps',
    method: 'GET',
    path: '/apps/{app_id}/stats',
    scopes: ['apps.read'],
    hints: ['RO'],
    summary: 'Get resource usage.',
    category: 'app',
    params: appId,
    args: {},
    result: object(
      {
        app_id: str(),
        containers: arrayOf(
          object(
            {
              service: str('Compose service'),
              container_id: str(),
              name: str('Container name'),
              state: str("The engine's state"),
              stats: nullable(containerStats()),
            },
            ['service', 'container_id', 'name', 'state', 'stats'],
          ),
          'Null stats for a container that is not running',
        ),
        totals: object(
          {
            cpu_percent: num('Sum over the containers'),
            memory_usage_bytes: int(undefined, 0),
            network_rx_bytes: int(undefined, 0),
            network_tx_bytes: int(undefined, 0),
            block_read_bytes: int(undefined, 0),
            block_write_bytes: int(undefined, 0),
            pids: int(undefined, 0),
          },
          ['cpu_percent', 'memory_usage_bytes', 'network_rx_bytes', 'network_tx_bytes', 'block_read_bytes', 'block_write_bytes', 'pids'],
        ),
      },
      ['app_id', 'containers', 'totals'],
    ),
  },
  {
    name: 'apps_compose_update',
    domain: 'apps',
    method: 'PATCH',
    path: '/apps/{app_id}/compose',
    scopes: ['apps.manage'],
    hints: [],
    summary: 'Update the compose file.',
    category: 'app',
    params: appId,
    args: {
      compose_content: str('New compose file content (YAML)', { minLength: 1 }),
    },
    required: ['compose_content'],
    result: appAndTask(),
  },
  {
    name: 'apps_folders_update',
    domain: 'apps',
    method: 'PATCH',
    path: '/apps/{app_id}/folders',
    scopes: ['apps.manage'],
    hints: [],
    summary: 'Update folder mounts.',
    category: 'app',
    params: appId,
    args: {
      folder_assignments: nullable(arrayOf(folderAssignment(), 'The new folder assignments')),
    },
    result: appAndTask(),
  },
  {
    name: 'apps_move',
    domain: 'apps',
    method: 'POST',
    path: '/apps/{app_id}/move',
    scopes: ['apps.manage'],
    hints: [],
    summary: 'Move app data to another pool.',
    category: 'storage',
    params: appId,
    args: {
      storage_id: str('Pool to move the app data to'),
    },
    required: ['storage_id'],
    result: object({ app: appView(), task: taskRecord() }, ['app', 'task']),
  },
  {
    name: 'apps_docs_get',
    domain: 'apps',
    method: 'GET',
    path: '/apps/{app_id}/docs',
    scopes: ['apps.read'],
    hints: ['RO'],
    summary: 'Get stored documentation.',
    category: 'app',
    params: appId,
    args: {},
    result: object(
      {
        app_id: str(),
        content: str("Markdown; '' when never set"),
        updated_at: nullable(dateTime('Null when never set')),
      },
      ['app_id', 'content', 'updated_at'],
    ),
  },
  {
    name: 'apps_docs_set',
    domain: 'apps',
    method: 'PUT',
    path: '/apps/{app_id}/docs',
    scopes: ['apps.manage'],
    hints: [],
    summary: 'Set or append documentation.',
    category: 'app',
    params: appId,
    args: {
      content: str('Markdown; the new text when replacing, or the text of one entry when appending'),
      append_entry: bool('Append as a timestamped entry instead of replacing'),
    },
    required: ['content'],
    result: object({ app_id: str(), content: str('The whole text after the change'), updated_at: dateTime() }, ['app_id', 'content', 'updated_at']),
  },
] as const satisfies readonly OperationSpec[];
