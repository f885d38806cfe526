/**
 * The shapes the VM, template and sandbox operations answer with, named once
 * and reused by their result schemas (api/registry/vms.ts, templates.ts,
 * sandboxes.ts). Each is a closed object: it names every field the service
 * puts in the answer (daemon/vms, daemon/sandboxes), so the conformance walk
 * fails on a field nobody described.
 */
import type { JsonSchema, Schema, ValueOf } from './types.js';
import { arrayOf, bool, dateTime, int, nullable, nullableOneOf, object, oneOf, str, strMap, taskRecord } from './schema.js';

/** One of several schemas (each closed): the value fits exactly the one whose fields it has. */
export const anyOfShapes = <S extends readonly JsonSchema[]>(alts: S, description?: string): Schema<ValueOf<S[number]>> =>
  (description ? { anyOf: [...alts], description } : { anyOf: [...alts] }) as Schema<ValueOf<S[number]>>;

const count = (description?: string) => int(description, 0);
const vmid = (description = 'Numeric VM ID') => int(description, 0);

export const VM_STATES = ['creating', 'stopped', 'running', 'paused', 'suspended'] as const;
export const NETWORK_TYPES = ['user', 'bridged', 'none'] as const;

/** A program or device a runtime needs, as it is now (daemon/lib/availability.ts). */
export const availabilityRow = () =>
  object(
    {
      name: str('Program or device, e.g. qemu-system-x86_64'),
      version: nullable(str('Its version as it reports it; null when it could not be run')),
      available: bool(),
      reason: nullable(str('Why it is unavailable; null when available')),
    },
    ['name', 'version', 'available', 'reason'],
  );

/** The cloud-init settings a VM boots with (the password itself is never shown). */
export const cloudInitView = () =>
  object(
    {
      enabled: bool('Whether the VM gets a cloud-init seed'),
      username: str('Cloud-init user'),
      ssh_public_key: nullable(str('Installed SSH public key')),
      ssh_enabled: bool(),
      ssh_password_auth: bool(),
      dns_servers: arrayOf(str()),
      ip_address: nullable(str('Static address with prefix; null for DHCP')),
      gateway: nullable(str()),
      package_upgrade: bool(),
      network_type: oneOf(
        NETWORK_TYPES,
        "user: QEMU's user-mode NAT (the guest reaches out, SSH is forwarded from a loopback port); bridged: a tap on a host bridge; none: no network card",
      ),
      network_bridge: nullable(str('Bridge of a bridged VM; null: the default bridge')),
      password_set: bool('Whether a password is stored for the cloud-init user'),
    },
    [
      'enabled',
      'username',
      'ssh_public_key',
      'ssh_enabled',
      'ssh_password_auth',
      'dns_servers',
      'ip_address',
      'gateway',
      'package_upgrade',
      'network_type',
      'network_bridge',
      'password_set',
    ],
  );

/** A VM as GET /vms/{id} shows it. */
export const vmView = () =>
  object(
    {
      vmid: vmid(),
      name: str(),
      state: oneOf(VM_STATES),
      image_id: str('Image or template it was made from'),
      storage_id: str('Pool holding its disks'),
      linked_clone: bool('Whether its root disk is an overlay on the image (or warm state)'),
      warm_state_id: nullable(str('Warm state it was resumed from')),
      cpu_cores: count(),
      memory_mb: count('Memory in MiB'),
      disk_size_gb: count('Root disk size in GiB'),
      root_layers: arrayOf(str(), "The root disk's qcow2 layers in the VM's directory, oldest first; the last is the one the VM writes"),
      autostart: bool(),
      disks: arrayOf(object({ disk_id: str(), size_gb: count() }, ['disk_id', 'size_gb']), 'Additional disks'),
      network: object(
        {
          type: oneOf(NETWORK_TYPES),
          bridge: nullable(str('Bridge of a bridged VM')),
          mac: nullable(str('MAC address of its network card; null without one')),
          ssh_port: nullable(int('Loopback port forwarded to the guest SSH port while it runs (user networking)', 0, 65535)),
        },
        ['type', 'bridge', 'mac', 'ssh_port'],
      ),
      cloud_init: cloudInitView(),
      identity: object(
        {
          method: nullableOneOf(
            ['offline', 'cloud-init', 'agent'] as const,
            'How its hostname, machine-id, seed and SSH host keys were written; null until the first start',
          ),
          pending: bool('Written at the first start'),
          skip_rekey: bool(),
          seed_written: bool(),
        },
        ['method', 'pending', 'skip_rekey', 'seed_written'],
      ),
      generation_id: nullable(str('Guid of its VM generation ID device')),
      owner: nullable(str('Domain that owns it; null for the VMs of /vms')),
      labels: strMap(),
      task_id: nullable(str('Task still copying its disk (state creating)')),
      created_at: dateTime(),
      updated_at: dateTime(),
    },
    [
      'vmid',
      'name',
      'state',
      'image_id',
      'storage_id',
      'linked_clone',
      'warm_state_id',
      'cpu_cores',
      'memory_mb',
      'disk_size_gb',
      'root_layers',
      'autostart',
      'disks',
      'network',
      'cloud_init',
      'identity',
      'generation_id',
      'owner',
      'labels',
      'task_id',
      'created_at',
      'updated_at',
    ],
    { title: 'Vm' },
  );

/** Where an image came from. */
const imageSource = () =>
  anyOfShapes(
    [
      object({ type: oneOf(['catalog'] as const), catalog_id: str(), url: str(), checksum: nullable(str()) }, ['type', 'catalog_id', 'url', 'checksum']),
      object({ type: oneOf(['import'] as const), file: str('File it was imported from') }, ['type', 'file']),
      object({ type: oneOf(['vm'] as const), vmid: vmid('VM it was captured from') }, ['type', 'vmid']),
      object({ type: oneOf(['build'] as const), base_image_id: str(), task_id: str('Template build task') }, ['type', 'base_image_id', 'task_id']),
    ] as const,
    'Where the image came from',
  );

/** An image or captured template as GET /vms/images lists it. */
export const imageView = () =>
  object(
    {
      image_id: str(),
      name: str(),
      kind: oneOf(['image', 'template'] as const, 'image: downloaded or imported; template: captured from a VM or built'),
      storage_id: str(),
      format: str('Always qcow2', { enum: ['qcow2'] }),
      size_bytes: count('Bytes on disk'),
      virtual_size_bytes: count('Size the guest sees'),
      min_cpu_cores: count(),
      min_memory_mb: count(),
      min_disk_gb: count(),
      default_user: nullable(str("The image's own cloud-init user")),
      labels: strMap(),
      linked_clones: arrayOf(vmid(), 'VMs whose disk rests on it'),
      warm_states: arrayOf(str(), 'Warm states whose disk rests on it'),
      source: imageSource(),
      created_at: dateTime(),
    },
    [
      'image_id',
      'name',
      'kind',
      'storage_id',
      'format',
      'size_bytes',
      'virtual_size_bytes',
      'min_cpu_cores',
      'min_memory_mb',
      'min_disk_gb',
      'default_user',
      'labels',
      'linked_clones',
      'warm_states',
      'source',
      'created_at',
    ],
    { title: 'VmImage' },
  );

/** A warm state (saved memory and disk of a running VM). */
export const warmStateView = () =>
  object(
    {
      id: str(),
      name: str(),
      vmid: vmid('VM it was saved from (it may be gone since)'),
      image_id: str(),
      storage_id: str(),
      cpu_cores: count(),
      memory_mb: count(),
      disk_size_gb: count(),
      network_type: oneOf(NETWORK_TYPES),
      size_bytes: count(),
      dependents: arrayOf(vmid(), 'VMs resumed from it that still exist'),
      owner: nullable(str()),
      created_at: dateTime(),
      generation_id: nullable(str('Generation ID of the VM it was saved from')),
      format: count('1: saved before VMs had a VM generation ID device (not resumed); 2: current'),
      resumable: bool(),
      reason: nullable(str('Why it is not resumed')),
    },
    [
      'id',
      'name',
      'vmid',
      'image_id',
      'storage_id',
      'cpu_cores',
      'memory_mb',
      'disk_size_gb',
      'network_type',
      'size_bytes',
      'dependents',
      'owner',
      'created_at',
      'generation_id',
      'format',
      'resumable',
      'reason',
    ],
    { title: 'WarmState' },
  );

/** `{task, ...}`: a change that runs as a background task. */
export const withTask = <P extends Record<string, JsonSchema>, R extends keyof P & string = never>(props: P, required: readonly R[] = []) =>
  object({ task: taskRecord(), ...props }, ['task', ...required]);

/** A sandbox as GET /sandboxes/{id} shows it. */
export const sandboxView = () =>
  object(
    {
      id: str('Sandbox ID'),
      name: str(),
      state: oneOf(['booting', 'running', 'paused', 'suspended', 'stopped', 'destroying', 'destroyed', 'failed'] as const),
      image_id: str(),
      resources: object({ cpu_cores: count(), memory_mb: count(), disk_gb: count() }, ['cpu_cores', 'memory_mb', 'disk_gb']),
      labels: strMap(),
      autostart: bool(),
      owner: str('Name of the token that owns it'),
      start: object(
        {
          method: nullableOneOf(['warm', 'cold'] as const, 'warm: resumed from a warm state; cold: booted from the image'),
          warm_state_id: nullable(str()),
          reason: nullable(str('Why a cold boot')),
          ms: nullable(count('From the create call to running')),
          attempts: count('Boots begun'),
        },
        ['method', 'warm_state_id', 'reason', 'ms', 'attempts'],
      ),
      vmid: nullable(vmid('Its VM')),
      error: nullable(str()),
      created_at: dateTime(),
      running_at: nullable(dateTime()),
      updated_at: dateTime(),
      destroyed_at: nullable(dateTime()),
      destroyed_by: nullable(str('Token that destroyed it')),
    },
    [
      'id',
      'name',
      'state',
      'image_id',
      'resources',
      'labels',
      'autostart',
      'owner',
      'start',
      'vmid',
      'error',
      'created_at',
      'running_at',
      'updated_at',
      'destroyed_at',
      'destroyed_by',
    ],
    { title: 'Sandbox' },
  );
