/**
 * The LXC operations: arguments with the shared rules of schema.ts (names,
 * image ids, addresses, bridges, container paths), and the shape of every
 * answer (docs/lxc.md says what each field means).
 */
import type { OperationSpec, Schema } from './types.js';
import {
  str,
  int,
  uint32,
  bool,
  oneOf,
  strArray,
  strMap,
  nullable,
  arrayOf,
  object,
  dateTime,
  taskRecord,
  resourceName,
  imageId,
  cidr,
  ipAddress,
  dnsServers,
  bridgeName,
  containerPath,
  emptyOr,
} from './schema.js';

/** Smallest disk limit: ext4's own metadata needs a few MiB, and a rootfs more. */
export const LXC_MIN_DISK_BYTES = 32 * 1024 * 1024;

// ---------------------------------------------------------------------------
// Argument pieces

const NAME_RULE = { reservedPrefix: 'svc-lxc-' };
const containerName = (description: string) => resourceName(description, NAME_RULE);

/**
 * A new name or null (keeps the name). Not `nullable(containerName())`: its
 * `not: {pattern}` (the reserved prefix) refuses null, as a `not` of a
 * string-only keyword does for every non-string.
 */
const newName = (description: string): Schema<string | null> => {
  const s = containerName(description);
  return { anyOf: [s, { type: 'null' }], description, 'x-expect': `${String(s['x-expect'])}, or null` } as Schema<string | null>;
};

/** 0 (the operation says what it means) or at least the smallest disk limit. */
const diskBytes = (description: string, zeroMeans: string): Schema<number> =>
  ({
    type: 'integer',
    minimum: 0,
    anyOf: [{ const: 0 }, { minimum: LXC_MIN_DISK_BYTES }],
    description,
    'x-expect': `0${zeroMeans} or at least ${LXC_MIN_DISK_BYTES} (32 MiB)`,
    examples: [0],
  }) as Schema<number>;

const mountPoint = () =>
  object(
    {
      host_path: str('Absolute host path: a managed folder (or a path inside one) or a path inside lxc.mount_roots'),
      container_path: containerPath('Where it appears in the container'),
      read_only: bool('Mounted read-only'),
    },
    ['host_path', 'container_path', 'read_only'],
  );

const lxcId = { id: int('LXC container ID', 0) };
const imageParam = { image_id: imageId('LXC template image ID') };

// ---------------------------------------------------------------------------
// Result pieces

const num = (description?: string): Schema<number> => ({ type: 'number', ...(description ? { description } : {}) }) as Schema<number>;
const nint = (description?: string) => nullable(int(description));
const nstr = (description?: string) => nullable(str(description));

const idRange = () =>
  object({ uid: int('First host uid of the map', 0), gid: int('First host gid of the map', 0), count: int('Ids mapped', 1) }, ['uid', 'gid', 'count']);

const STATES = ['running', 'stopped', 'frozen', 'starting', 'stopping', 'aborting'] as const;

const containerView = () =>
  object(
    {
      lxcid: int('Container ID', 0),
      name: str(),
      state: oneOf(STATES),
      lxc_name: str("LXC's name of the container (svc-lxc-<lxcid>)"),
      hostname: str('Hostname made from the name'),
      template: str('Image it was created from'),
      template_storage_id: str('Pool that held the image'),
      storage_id: str('Pool of the rootfs'),
      rootfs: object({ kind: oneOf(['dir', 'loop', 'zfs'] as const, 'dir: a directory; loop: an ext4 image (disk limit); zfs: a linked clone'), path: str() }, [
        'kind',
        'path',
      ]),
      cpu_cores: int(undefined, 0),
      memory_mb: int(undefined, 0),
      disk_size_bytes: int('Disk limit; 0: none', 0),
      privileged: bool(),
      idmap: nullable(idRange()),
      nesting: bool(),
      environment: strMap(),
      network: object(
        {
          type: oneOf(['bridged', 'none'] as const),
          bridge: nstr('Bridge it attaches to (the default bridge resolved); null without network'),
          bridge_is_default: bool(),
          ip_address: nstr('CIDR; null: DHCP'),
          gateway: nstr(),
          dns_servers: strArray(),
          hwaddr: str('MAC of eth0'),
        },
        ['type', 'bridge', 'bridge_is_default', 'ip_address', 'gateway', 'dns_servers', 'hwaddr'],
      ),
      autostart: bool(),
      mount_points: arrayOf(object({ host_path: str(), container_path: str(), read_only: bool() }, ['host_path', 'container_path', 'read_only'])),
      linked_clone: bool(),
      pending_restart: bool('Settings that take effect at the next start are waiting for it'),
      created_at: dateTime(),
      updated_at: dateTime(),
    },
    [
      'lxcid',
      'name',
      'state',
      'lxc_name',
      'hostname',
      'template',
      'template_storage_id',
      'storage_id',
      'rootfs',
      'cpu_cores',
      'memory_mb',
      'disk_size_bytes',
      'privileged',
      'idmap',
      'nesting',
      'environment',
      'network',
      'autostart',
      'mount_points',
      'linked_clone',
      'pending_restart',
      'created_at',
      'updated_at',
    ],
    { title: 'LxcContainer' },
  );

const oneContainer = () => object({ container: containerView() }, ['container']);
const aTask = () => object({ task: taskRecord() }, ['task']);

const imageView = () =>
  object(
    {
      image_id: str(),
      storage_id: str(),
      source: oneOf(['download', 'import', 'template'] as const),
      size_bytes: int(undefined, 0),
      sha256: str(),
      compression: oneOf(['xz', 'gzip', 'zstd', 'none'] as const),
      created_at: str('When it was made (RFC 3339)'),
      os: nstr(),
      release: nstr(),
      arch: nstr(),
      variant: nstr(),
      version: nstr(),
      from_lxcid: nint('Container a template was captured from'),
      used_by: arrayOf(int(undefined, 0), 'Linked clones that depend on it'),
    },
    [
      'image_id',
      'storage_id',
      'source',
      'size_bytes',
      'sha256',
      'compression',
      'created_at',
      'os',
      'release',
      'arch',
      'variant',
      'version',
      'from_lxcid',
      'used_by',
    ],
    { title: 'LxcImage' },
  );

const catalogImage = () =>
  object(
    {
      image_id: str(),
      product: str('Product key in the index'),
      os: nstr(),
      release: nstr(),
      arch: nstr(),
      variant: nstr(),
      version: str('Newest version with a rootfs tarball'),
      aliases: strArray(),
      size_bytes: int(undefined, 0),
      sha256: str(),
      cached_on: strArray('Pools that have it'),
    },
    ['image_id', 'product', 'os', 'release', 'arch', 'variant', 'version', 'aliases', 'size_bytes', 'sha256', 'cached_on'],
  );

const availability = () =>
  object({ name: str(), version: nstr(), available: bool(), reason: nstr('What is missing and what to install') }, ['name', 'version', 'available', 'reason']);
const idRangeFound = () => nullable(object({ start: int(undefined, 0), count: int(undefined, 0) }, ['start', 'count']));

const violation = () =>
  object(
    {
      lxcid: int(undefined, 0),
      name: str(),
      rule: oneOf(['lxc.allow_privileged', 'mount_points'] as const),
      container_path: str('The mount point concerned (mount_points)'),
      message: str(),
    },
    ['lxcid', 'name', 'rule', 'message'],
  );

const hostStatus = () =>
  object(
    {
      name: str(),
      version: nstr('LXC version'),
      available: bool('lxc-start is installed'),
      reason: nstr(),
      ready: bool('Nothing is missing'),
      programs: arrayOf(availability(), 'What the driver uses, as it is now (programs, cgroup controllers, the id map)'),
      cgroup: object({ version: oneOf(['v1', 'hybrid', 'v2'] as const), controllers: strArray(), missing: strArray() }, ['version', 'controllers', 'missing']),
      idmap: object({ ready: bool(), uid_range: idRangeFound(), gid_range: idRangeFound(), reason: nstr(), range: nullable(idRange()) }, [
        'ready',
        'uid_range',
        'gid_range',
        'reason',
        'range',
      ]),
      apparmor: bool(),
      lsm: object(
        {
          apparmor: bool(),
          selinux: { type: ['string', 'null'], enum: ['enforcing', 'permissive', null] } as Schema<'enforcing' | 'permissive' | null>,
          confines_containers: bool(),
          profile: oneOf(['generated', 'unconfined'] as const),
          note: str(),
        },
        ['apparmor', 'selinux', 'confines_containers', 'profile', 'note'],
      ),
      allow_privileged: bool(),
      violations: arrayOf(violation()),
      lxc_path: str(),
      default_bridge: nullable(object({ name: str(), exists: bool() }, ['name', 'exists'])),
      image_server: nstr(),
      zfs_pools: strArray(),
      disk_limits: str(),
      missing: strArray('What is missing and how to fix it'),
    },
    [
      'name',
      'version',
      'available',
      'reason',
      'ready',
      'programs',
      'cgroup',
      'idmap',
      'apparmor',
      'lsm',
      'allow_privileged',
      'violations',
      'lxc_path',
      'default_bridge',
      'image_server',
      'zfs_pools',
      'disk_limits',
      'missing',
    ],
  );

const netCounters = () =>
  object({ name: str(), rx_bytes: int(undefined, 0), rx_packets: int(undefined, 0), tx_bytes: int(undefined, 0), tx_packets: int(undefined, 0) }, [
    'name',
    'rx_bytes',
    'rx_packets',
    'tx_bytes',
    'tx_packets',
  ]);

const stats = () =>
  object(
    {
      lxcid: int(undefined, 0),
      state: oneOf(STATES),
      cpu: object({ usage_seconds: nullable(num()), usage_percent: nullable(num('Over a 200 ms sample; 100 is one core')), cores_limit: int(undefined, 0) }, [
        'usage_seconds',
        'usage_percent',
        'cores_limit',
      ]),
      memory: object({ used_bytes: nint(), limit_bytes: nint(), cache_bytes: nint() }, ['used_bytes', 'limit_bytes', 'cache_bytes']),
      disk: object(
        {
          used_bytes: nint(),
          limit_bytes: nint(),
          total_bytes: nint(),
          available_bytes: nint(),
          source: oneOf(['statfs', 'ext4 superblock', 'du'] as const, 'Where the figures come from'),
        },
        ['used_bytes', 'limit_bytes', 'total_bytes', 'available_bytes', 'source'],
      ),
      network: object({ rx_bytes: int(undefined, 0), tx_bytes: int(undefined, 0), interfaces: arrayOf(netCounters()), addresses: strArray() }, [
        'rx_bytes',
        'tx_bytes',
        'interfaces',
        'addresses',
      ]),
      pids: nint('Processes; null when the cgroup does not say'),
      sampled_at: dateTime(),
    },
    ['lxcid', 'state', 'cpu', 'memory', 'disk', 'network', 'pids', 'sampled_at'],
  );

const docs = () => object({ lxcid: int(undefined, 0), content: str(), updated_at: nullable(dateTime()) }, ['lxcid', 'content', 'updated_at']);

const imageRef = () => object({ image_id: str(), storage_id: str() }, ['image_id', 'storage_id']);

// ---------------------------------------------------------------------------

export const operations = [
  {
    name: 'lxc_list',
    domain: 'lxc',
    method: 'GET',
    path: '/lxc',
    scopes: ['lxc.read'],
    hints: ['RO'],
    summary: 'List containers.',
    category: 'system',
    params: {},
    args: {},
    result: object({ containers: arrayOf(containerView()) }, ['containers']),
  },
  {
    name: 'lxc_create',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc',
    scopes: ['lxc.manage'],
    hints: [],
    summary: 'Create a container from a template image.',
    category: 'system',
    params: {},
    args: {
      name: containerName('Container name; unique among containers without regard to case'),
      template: imageId('Image ID from the LXC image catalog'),
      cpu_cores: uint32('CPU cores; default the image minimum'),
      memory_mb: uint32('Memory in MiB; default the image minimum'),
      storage_id: str('Pool for the rootfs'),
      lxcid: int('Numeric container ID; assigned automatically when omitted', 0),
      network_type: oneOf(['bridged', 'none'], 'Network type'),
      dns_servers: nullable(dnsServers('DNS servers')),
      ip_address: emptyOr(cidr('Static IP address, optional CIDR (without a prefix: /24, or /64 for IPv6); empty: DHCP')),
      gateway: emptyOr(ipAddress('Gateway address, inside the subnet of ip_address')),
      autostart: bool('Start on host boot'),
      privileged: bool(
        'Privileged container; default false; when false, idmap, capability dropping and seccomp confinement apply. A privileged container is root on the host: refused (403) unless the host sets lxc.allow_privileged',
      ),
      nesting: bool('Allow nested containers; changeable later by update'),
      environment: strMap('Environment variables: names [A-Za-z_][A-Za-z0-9_]*, values without newline or NUL, at most 256'),
      disk_size_bytes: diskBytes('Root disk size in bytes; 0 uses the template default', ''),
      template_storage_id: str('Pool where the image resides'),
      mount_points: nullable(
        arrayOf(
          mountPoint(),
          'Host paths to mount into the container: managed folders (or paths inside them) and lxc.mount_roots only, never a storage pool root or a directory hostd keeps for itself',
          { maxItems: 64 },
        ),
      ),
      network_bridge: emptyOr(bridgeName('Bridge name; empty uses the global default')),
      linked_clone: bool(
        "Rootfs as a copy-on-write ZFS clone of the image's base dataset; storage_id must be a ZFS pool; the image cannot be deleted or moved while the container exists",
      ),
      seed_data: str('Written into the guest at /etc/svc/seed before first boot; at most 1 MiB'),
    },
    required: ['name', 'template'],
    result: oneContainer(),
  },
  {
    name: 'lxc_images_list',
    domain: 'lxc',
    method: 'GET',
    path: '/lxc/images',
    scopes: ['lxc.read'],
    hints: ['RO'],
    summary: 'List cached template images.',
    category: 'system',
    params: {},
    args: {},
    result: object({ images: arrayOf(imageView()) }, ['images']),
  },
  {
    name: 'lxc_images_catalog',
    domain: 'lxc',
    method: 'GET',
    path: '/lxc/images/catalog',
    scopes: ['lxc.read'],
    hints: ['RO'],
    summary: 'List images available for download.',
    category: 'system',
    params: {},
    args: {},
    result: object(
      {
        server: nstr('The image server (lxc.image_server); null when none is configured'),
        images: arrayOf(catalogImage()),
        reason: str('Why the catalog is empty (no image server)'),
      },
      ['server', 'images'],
    ),
  },
  {
    name: 'lxc_images_download',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/images/{image_id}',
    scopes: ['lxc.manage'],
    hints: [],
    summary: 'Download an image into a pool.',
    category: 'storage',
    params: imageParam,
    args: {
      storage_id: str('Pool to download into; default the default cache storage'),
    },
    result: aTask(),
  },
  {
    name: 'lxc_template_create',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/{id}/template',
    scopes: ['lxc.manage'],
    hints: [],
    summary: "Capture the container's rootfs as a template image.",
    category: 'system',
    params: lxcId,
    args: {
      image_id: imageId('ID of the new image; default the sanitized container name; fails if an image with that ID already exists on the storage'),
    },
    result: aTask(),
  },
  {
    name: 'lxc_images_delete',
    domain: 'lxc',
    method: 'DELETE',
    path: '/lxc/images/{image_id}',
    scopes: ['lxc.manage'],
    hints: ['DEL'],
    summary: 'Delete a cached image.',
    category: 'storage',
    params: imageParam,
    args: {
      storage_id: str('Pool holding the image'),
    },
    required: ['storage_id'],
    result: object({ deleted: imageRef() }, ['deleted']),
  },
  {
    name: 'lxc_images_move',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/images/{image_id}/move',
    scopes: ['lxc.manage'],
    hints: [],
    summary: 'Move a cached image.',
    category: 'storage',
    params: imageParam,
    args: {
      source_storage_id: str('Pool the image is on now'),
      target_storage_id: str('Pool to move the image to'),
    },
    required: ['source_storage_id', 'target_storage_id'],
    result: aTask(),
  },
  {
    name: 'lxc_host_status',
    domain: 'lxc',
    method: 'GET',
    path: '/lxc/host-status',
    scopes: ['lxc.read'],
    hints: ['RO'],
    summary: 'Return LXC host runtime checks.',
    category: 'system',
    params: {},
    args: {},
    result: hostStatus(),
  },
  {
    name: 'lxc_get',
    domain: 'lxc',
    method: 'GET',
    path: '/lxc/{id}',
    scopes: ['lxc.read'],
    hints: ['RO'],
    summary: 'Get a container.',
    category: 'system',
    params: lxcId,
    args: {},
    result: oneContainer(),
  },
  {
    name: 'lxc_update',
    domain: 'lxc',
    method: 'PATCH',
    path: '/lxc/{id}',
    scopes: ['lxc.manage'],
    hints: [],
    summary: 'Update name, CPU, memory or network.',
    category: 'system',
    params: lxcId,
    args: {
      cpu_cores: uint32('CPU cores; 0 leaves unchanged'),
      memory_mb: {
        ...uint32('Memory in MiB; 0 leaves unchanged'),
        anyOf: [{ const: 0 }, { minimum: 16 }],
        'x-expect': '0 (unchanged) or at least 16',
      } as Schema<number>,
      nesting: bool('Allow nested containers (native config only)'),
      new_name: newName('New name; omit or null keeps the name; unique among containers without regard to case'),
      ip_address: nullable(emptyOr(cidr('Static IP address; omit keeps; empty string clears, reverting to DHCP'))),
      gateway: nullable(emptyOr(ipAddress('Gateway address; omit keeps; empty clears'))),
      dns_servers: nullable(dnsServers('DNS servers; omit keeps; empty array clears')),
      network_type: oneOf(['bridged', 'none'], 'Network type'),
      network_bridge: emptyOr(bridgeName('Bridge name; empty uses the global default')),
    },
    result: object({ container: containerView(), restart_required: bool('Some of the change takes effect at the next start') }, [
      'container',
      'restart_required',
    ]),
  },
  {
    name: 'lxc_delete',
    domain: 'lxc',
    method: 'DELETE',
    path: '/lxc/{id}',
    scopes: ['lxc.manage'],
    hints: ['DEL'],
    summary: 'Delete a container.',
    category: 'system',
    params: lxcId,
    args: {},
    result: object({ deleted: { type: 'boolean', const: true } as Schema<true>, lxcid: int(undefined, 0), name: str() }, ['deleted', 'lxcid', 'name']),
  },
  {
    name: 'lxc_start',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/{id}/start',
    scopes: ['lxc.manage'],
    hints: ['IDEM'],
    summary: 'Start.',
    category: 'system',
    params: lxcId,
    args: {},
    result: oneContainer(),
  },
  {
    name: 'lxc_stop',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/{id}/stop',
    scopes: ['lxc.manage'],
    hints: ['IDEM'],
    summary: 'Stop.',
    category: 'system',
    params: lxcId,
    args: {},
    result: oneContainer(),
  },
  {
    name: 'lxc_restart',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/{id}/restart',
    scopes: ['lxc.manage'],
    hints: ['IDEM'],
    summary: 'Restart.',
    category: 'system',
    params: lxcId,
    args: {},
    result: oneContainer(),
  },
  {
    name: 'lxc_freeze',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/{id}/freeze',
    scopes: ['lxc.manage'],
    hints: [],
    summary: 'Pause all processes.',
    category: 'system',
    params: lxcId,
    args: {},
    result: oneContainer(),
  },
  {
    name: 'lxc_unfreeze',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/{id}/unfreeze',
    scopes: ['lxc.manage'],
    hints: [],
    summary: 'Unfreeze a frozen container.',
    category: 'system',
    params: lxcId,
    args: {},
    result: oneContainer(),
  },
  {
    name: 'lxc_clone',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/{id}/clone',
    scopes: ['lxc.manage'],
    hints: [],
    summary: 'Clone to a new name.',
    category: 'system',
    params: { id: int('ID of the new container (the clone), as for VMs; 409 when taken. The source is source_lxcid', 0) },
    args: {
      source_lxcid: int('Numeric container ID of the source container (stopped)', 0),
      name: containerName('Name of the new container'),
    },
    required: ['source_lxcid', 'name'],
    result: oneContainer(),
  },
  {
    name: 'lxc_exec',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/{id}/exec',
    scopes: ['lxc.exec'],
    hints: ['DEL'],
    summary: 'Run a shell command via `/bin/sh -c`.',
    category: 'system',
    params: lxcId,
    args: {
      command: str('Shell command, run as /bin/sh -c; stdout and stderr are each kept up to 1 MiB, and truncated says when one was cut'),
      timeout_seconds: uint32('Seconds to wait before giving up; default 60'),
    },
    required: ['command'],
    result: object(
      {
        lxcid: int(undefined, 0),
        exit_code: nint('null when the command was killed at its deadline'),
        stdout: str(),
        stderr: str(),
        truncated: bool('A stream was cut at 1 MiB'),
        timed_out: bool(),
        duration_ms: int(undefined, 0),
      },
      ['lxcid', 'exit_code', 'stdout', 'stderr', 'truncated', 'timed_out', 'duration_ms'],
    ),
  },
  {
    name: 'lxc_stats',
    domain: 'lxc',
    method: 'GET',
    path: '/lxc/{id}/stats',
    scopes: ['lxc.read'],
    hints: ['RO'],
    summary: 'Get resource usage.',
    category: 'system',
    params: lxcId,
    args: {},
    result: object({ stats: stats() }, ['stats']),
  },
  {
    name: 'lxc_disk_update',
    domain: 'lxc',
    method: 'PATCH',
    path: '/lxc/{id}/disk',
    scopes: ['lxc.manage'],
    hints: [],
    summary: 'Set the disk limit.',
    category: 'system',
    params: lxcId,
    args: {
      disk_size_bytes: diskBytes('Root disk limit in bytes; 0 removes the limit', ' (no limit)'),
    },
    required: ['disk_size_bytes'],
    result: oneContainer(),
  },
  {
    name: 'lxc_move',
    domain: 'lxc',
    method: 'POST',
    path: '/lxc/{id}/move',
    scopes: ['lxc.manage'],
    hints: [],
    summary: 'Move the rootfs to another pool.',
    category: 'storage',
    params: lxcId,
    args: {
      storage_id: str('Pool to move the rootfs to'),
    },
    required: ['storage_id'],
    result: aTask(),
  },
  {
    name: 'lxc_docs_get',
    domain: 'lxc',
    method: 'GET',
    path: '/lxc/{id}/docs',
    scopes: ['lxc.read'],
    hints: ['RO'],
    summary: 'Get stored documentation.',
    category: 'system',
    params: lxcId,
    args: {},
    result: docs(),
  },
  {
    name: 'lxc_docs_set',
    domain: 'lxc',
    method: 'PUT',
    path: '/lxc/{id}/docs',
    scopes: ['lxc.manage'],
    hints: [],
    summary: 'Set or append documentation.',
    category: 'system',
    params: lxcId,
    args: {
      content: str('Markdown; the new text when replacing, or the text of one entry when appending'),
      append_entry: bool('Append as a timestamped entry instead of replacing'),
    },
    required: ['content'],
    result: docs(),
  },
] as const satisfies readonly OperationSpec[];
