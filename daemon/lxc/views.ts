/**
 * How a container record answers: its state in the spec's words and its view
 * (the registry's result schema of lxc_get, `ResultOf`, is its type). Pure.
 */
import type { ResultOf } from '../../api/registry/index.js';
import type { LxcState, RootfsPlacement } from './driver.js';
import type { ContainerRecord } from './model.js';
import { hostnameOf, lxcNameOf } from './naming.js';

export type ContainerView = ResultOf<'lxc_get'>['container'];
export type StateName = ContainerView['state'];

export function stateName(s: LxcState): StateName {
  switch (s) {
    case 'RUNNING':
    case 'THAWED':
      return 'running';
    case 'FROZEN':
    case 'FREEZING':
      return 'frozen';
    case 'STARTING':
      return 'starting';
    case 'STOPPING':
      return 'stopping';
    case 'ABORTING':
      return 'aborting';
    default:
      return 'stopped';
  }
}

/**
 * The view of a record in `state`. `rootfs` is null when the record's pool
 * is no longer configured (its path is then empty); `bridge` is the bridge a
 * bridged container attaches to, the default resolved.
 */
export function containerView(rec: ContainerRecord, state: StateName, rootfs: RootfsPlacement | null, bridge: string | null): ContainerView {
  return {
    lxcid: rec.lxcid,
    name: rec.name,
    state,
    lxc_name: lxcNameOf(rec.lxcid),
    hostname: hostnameOf(rec.name, rec.lxcid),
    template: rec.template,
    template_storage_id: rec.template_storage_id,
    storage_id: rec.storage_id,
    rootfs: { kind: rec.rootfs_kind, path: rootfs?.path ?? '' },
    cpu_cores: rec.cpu_cores,
    memory_mb: rec.memory_mb,
    disk_size_bytes: rec.disk_size_bytes,
    privileged: rec.privileged,
    idmap: rec.idmap,
    nesting: rec.nesting,
    environment: { ...rec.environment },
    network: {
      type: rec.network.type,
      bridge,
      bridge_is_default: rec.network.type === 'bridged' && rec.network.bridge === null,
      ip_address: rec.network.ip_address,
      gateway: rec.network.gateway,
      dns_servers: [...rec.network.dns_servers],
      hwaddr: rec.network.hwaddr,
    },
    autostart: rec.autostart,
    mount_points: rec.mount_points.map((m) => ({ ...m })),
    linked_clone: rec.linked_clone,
    pending_restart: rec.rootfs_sync_pending && state !== 'stopped',
    created_at: rec.created_at,
    updated_at: rec.updated_at,
  };
}
