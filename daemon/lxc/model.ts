/**
 * What a container is, as the service stores it and the LXC driver renders
 * it into a config file: shapes only, shared by both without either knowing
 * the other.
 */
import type { IdRange } from './settings.js';

export type NetworkType = 'bridged' | 'none';

export interface NetworkSettings {
  type: NetworkType;
  /** Bridge named for this container; null uses the configured default. */
  bridge: string | null;
  /** CIDR (a prefix is added when the request gave none); null: DHCP. */
  ip_address: string | null;
  gateway: string | null;
  dns_servers: string[];
  /** Stable MAC of eth0 (kept across restarts, new on clone). */
  hwaddr: string;
}

export interface MountPoint {
  /** Real path on the host (symlinks resolved at the time it was allowed). */
  host_path: string;
  /** Absolute path inside the container. */
  container_path: string;
  read_only: boolean;
}

/**
 * Where the rootfs lives: a directory, an ext4 image that LXC loop-mounts
 * (the disk limit), or a ZFS dataset cloned from an image's base.
 */
export type RootfsKind = 'dir' | 'loop' | 'zfs';

export interface ContainerRecord {
  lxcid: number;
  name: string;
  /** The image it was created from, and the pool that held it. */
  template: string;
  template_storage_id: string;
  storage_id: string;
  rootfs_kind: RootfsKind;
  /** ZFS dataset of a linked clone (rootfs_kind 'zfs'). */
  zfs_dataset?: string;
  cpu_cores: number;
  memory_mb: number;
  /** 0: no limit. */
  disk_size_bytes: number;
  privileged: boolean;
  /** The id range of an unprivileged container (null when privileged). */
  idmap: IdRange | null;
  nesting: boolean;
  environment: Record<string, string>;
  network: NetworkSettings;
  autostart: boolean;
  mount_points: MountPoint[];
  linked_clone: boolean;
  /**
   * Files hostd keeps inside the rootfs (hostname, network config, resolv.conf)
   * are out of date: rewritten at the next start, while nothing inside runs.
   */
  rootfs_sync_pending: boolean;
  created_at: string;
  updated_at: string;
}
