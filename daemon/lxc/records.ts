/**
 * The lxc sublevels: container records (the source of truth; each LXC config
 * file is rendered from its record), documentation, the intent journal and a
 * little state (the boot id of the last start).
 */
import { IntentJournal } from '../lib/journal.js';
import type { Store, Sub } from '../store/store.js';
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

export interface DocsRecord {
  content: string;
  updated_at: string | null;
}

/** What an open intent says was under way when the daemon stopped. */
export type Intent =
  | { op: 'create'; lxcid: number; dir: string; confDir: string; zfs_dataset?: string }
  | { op: 'delete'; lxcid: number; dir: string; confDir: string; zfs_dataset?: string }
  | { op: 'move'; lxcid: number; from_storage: string; to_storage: string; from_dir: string; to_dir: string }
  | { op: 'disk'; lxcid: number; dir: string; new_kind: RootfsKind; new_path: string; old_path: string; disk_size_bytes: number }
  | { op: 'cleanup'; paths: string[]; zfs_datasets?: string[] }
  | { op: 'image'; tmp: string; final: string; remove_after?: string };

export const ctKey = (lxcid: number): string => String(lxcid).padStart(10, '0');

export class LxcRecords {
  readonly containers: Sub<ContainerRecord>;
  readonly docs: Sub<DocsRecord>;
  readonly intents: Sub<Intent>;
  readonly meta: Sub<unknown>;
  readonly journal: IntentJournal<Intent>;

  constructor(readonly store: Store) {
    this.containers = store.sub<ContainerRecord>('lxc_containers');
    this.docs = store.sub<DocsRecord>('lxc_docs');
    this.intents = store.sub<Intent>('lxc_intents');
    this.meta = store.sub<unknown>('lxc_meta');
    this.journal = new IntentJournal<Intent>(store, this.intents);
  }

  async all(): Promise<ContainerRecord[]> {
    return this.containers.values().all();
  }

  async get(lxcid: number): Promise<ContainerRecord | undefined> {
    return (await this.containers.get(ctKey(lxcid))) ?? undefined;
  }

  putOp(rec: ContainerRecord) {
    return { type: 'put' as const, sub: this.containers, key: ctKey(rec.lxcid), value: rec };
  }

  delOps(lxcid: number) {
    return [
      { type: 'del' as const, sub: this.containers, key: ctKey(lxcid) },
      { type: 'del' as const, sub: this.docs, key: ctKey(lxcid) },
    ];
  }

  async put(rec: ContainerRecord): Promise<void> {
    await this.containers.put(ctKey(rec.lxcid), rec);
  }
}
