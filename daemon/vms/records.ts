/**
 * The VM domain's records in the store (sublevels `vms`, `vms_images`,
 * `vms_warm`, `vms_docs`, `vms_intents`, `vms_meta`) and the intent types of
 * its crash-safe changes. Recovery of open intents is in recovery.ts.
 */
import type { DocsRecord } from '../lib/docs.js';
import { IntentJournal, type JournalOp } from '../lib/journal.js';
import type { Store, Sub } from '../store/store.js';
import type { CloudInitSettings } from './driver.js';

/** A VM's state as the API shows it (context.ts works it out from the record and the runtime). */
export type VmState = 'creating' | 'stopped' | 'running' | 'paused' | 'suspended';

export type NetworkType = 'user' | 'bridged' | 'none';

export interface ImageRecord {
  image_id: string;
  storage_id: string;
  name: string;
  /** `image`: downloaded or imported; `template`: captured from a VM or built by POST /templates. */
  kind: 'image' | 'template';
  /** Absolute path of the qcow2 file. */
  file: string;
  size_bytes: number;
  virtual_size_bytes: number;
  min_cpu_cores: number;
  min_memory_mb: number;
  min_disk_gb: number;
  /** The image's own cloud-init user, if known (cloud images: debian, ubuntu). */
  default_user: string | null;
  labels: Record<string, string>;
  source:
    | { type: 'catalog'; catalog_id: string; url: string; checksum: string | null }
    | { type: 'import'; file: string }
    | { type: 'vm'; vmid: number }
    | { type: 'build'; base_image_id: string; task_id: string };
  created_at: string;
}

export interface DiskRecord {
  disk_id: string;
  /** Absolute path. */
  file: string;
  size_gb: number;
  /** PCI slot, fixed for the disk's life (resume needs the same layout). */
  slot: number;
  created_at: string;
}

export interface StoredCloudInit extends CloudInitSettings {
  /** Whether a password is stored (in the secret store, never here). */
  password_set: boolean;
  /** Bumped on every change: part of the instance-id, so cloud-init applies the change at next boot. */
  generation: number;
}

export interface VmRecord {
  vmid: number;
  name: string;
  /**
   * null for VMs of the /vms API. Another domain that creates VMs through the
   * service API marks them (e.g. `sandbox`); /vms hides those (see service.ts).
   */
  owner: string | null;
  labels: Record<string, string>;
  storage_id: string;
  /** Absolute directory holding the VM's disks, seed and suspend state. */
  dir: string;
  image_id: string;
  linked_clone: boolean;
  /** What the root disk's backing chain rests on (delete/move of those is refused while this VM exists). */
  base_image_id: string | null;
  base_warm_state_id: string | null;
  cpu_cores: number;
  memory_mb: number;
  disk_size_gb: number;
  autostart: boolean;
  /** Stored state; `running` (and paused) is read from the process, not stored. */
  state: 'creating' | 'stopped' | 'suspended';
  /** Root disk layers (file names in `dir`), oldest first; the last is the active one. */
  root_layers: string[];
  disks: DiskRecord[];
  cloud_init: StoredCloudInit;
  mac: string;
  uuid: string;
  /** Loopback port forwarded to the guest's SSH (user networking), chosen at each start. */
  ssh_port: number | null;
  /**
   * The VM's own identity (hostname, machine-id, SSH host keys, /etc/svc/seed):
   * `pending` until the first start writes it into the stopped disk (offline),
   * or cloud-init carries it (images without an ext root), or, for warm-state
   * clones, the guest agent sets it right after the resume.
   */
  identity: { method: 'offline' | 'cloud-init' | 'agent' | null; pending: boolean; skip_rekey: boolean; seed_written: boolean };
  /** The cloud-init generation the seed ISO on disk was built from (null: not built yet). */
  seed_generation: number | null;
  /** The saved memory a start resumes from (suspend), absolute. */
  resume_file: string | null;
  /**
   * The VM generation ID (a UUID) of the machine's `vmgenid` device: set at
   * create, kept across its starts, suspends and resumes, new for every VM
   * resumed from a warm state. null (or absent, in records written before
   * the device existed) while the VM's machine or suspended memory has no
   * device; its next cold start gives it one.
   */
  vmgenid?: string | null;
  /** Task of a create or clone still copying. */
  task_id: string | null;
  created_at: string;
  updated_at: string;
}

export interface WarmStateRecord {
  id: string;
  name: string;
  /** The VM it was saved from (it may be gone since). */
  vmid: number;
  owner: string | null;
  image_id: string;
  storage_id: string;
  dir: string;
  memory_file: string;
  /** The root disk's layer frozen at the instant of the save (a hard link of the VM's layer). */
  disk_file: string;
  base_image_id: string | null;
  base_warm_state_id: string | null;
  /** The machine the memory belongs to: a restore runs the same. */
  cpu_cores: number;
  memory_mb: number;
  disk_size_gb: number;
  network_type: NetworkType;
  cloud_init: StoredCloudInit;
  size_bytes: number;
  created_at: string;
  /**
   * WARM_FORMAT for states saved by a machine with a VM generation ID device;
   * absent in records written before the device existed (those are refused).
   */
  format?: number;
  /** The generation ID of the saved VM (every VM resumed from the state gets its own). */
  vmgenid?: string;
}

/**
 * Warm-state format: 2 = saved by a machine with a `vmgenid` device, so that
 * every resume can hand the guest a new generation ID. States without it
 * cannot be resumed with the device (the device set differs) and would give
 * each clone the saved kernel's random-number state.
 */
export const WARM_FORMAT = 2;

/** Every crash-safe change: what recovery needs to finish or undo it. */
export type VmIntent =
  | { op: 'create'; vmid: number; dir: string; task_id?: string }
  | { op: 'delete'; vmid: number; dir: string }
  | { op: 'suspend'; vmid: number; file: string }
  | { op: 'resume'; vmid: number; file: string }
  /** `vmgenid`: the saved machine's generation ID (absent in intents of earlier versions: such a state stays unresumable). */
  | { op: 'warm-save'; vmid: number; id: string; name: string; dir: string; new_layer: string; vmgenid?: string }
  | { op: 'warm-restore'; vmid: number; id: string; dir: string }
  | { op: 'warm-delete'; id: string; dir: string }
  | { op: 'template'; image_id: string; file: string }
  | { op: 'image-add'; image_id: string; file: string }
  | { op: 'image-delete'; image_id: string; file: string }
  | { op: 'image-move'; image_id: string; from: string; to: string; storage_id: string }
  | { op: 'iso-move'; from: string; to: string }
  | { op: 'disk-attach'; vmid: number; disk_id: string; file: string }
  | { op: 'disk-detach'; vmid: number; disk_id: string; file: string }
  | { op: 'disk-grow'; vmid: number; disk_id: string; file: string }
  | { op: 'seed'; vmid: number };

export const vmKey = (vmid: number) => String(vmid).padStart(10, '0');

export class VmRecords {
  readonly vms: Sub<VmRecord>;
  readonly images: Sub<ImageRecord>;
  readonly warm: Sub<WarmStateRecord>;
  readonly docs: Sub<DocsRecord>;
  readonly meta: Sub<unknown>;
  readonly intents: Sub<VmIntent>;
  readonly journal: IntentJournal<VmIntent>;

  constructor(readonly store: Store) {
    this.vms = store.sub<VmRecord>('vms');
    this.images = store.sub<ImageRecord>('vms_images');
    this.warm = store.sub<WarmStateRecord>('vms_warm');
    this.docs = store.sub<DocsRecord>('vms_docs');
    this.meta = store.sub<unknown>('vms_meta');
    this.intents = store.sub<VmIntent>('vms_intents');
    this.journal = new IntentJournal<VmIntent>(store, this.intents);
  }

  async vm(vmid: number): Promise<VmRecord | undefined> {
    return (await this.vms.get(vmKey(vmid))) ?? undefined;
  }

  async allVms(): Promise<VmRecord[]> {
    return this.vms.values().all();
  }

  async image(id: string): Promise<ImageRecord | undefined> {
    return (await this.images.get(id)) ?? undefined;
  }

  async allImages(): Promise<ImageRecord[]> {
    return this.images.values().all();
  }

  async warmState(id: string): Promise<WarmStateRecord | undefined> {
    return (await this.warm.get(id)) ?? undefined;
  }

  async allWarm(): Promise<WarmStateRecord[]> {
    return this.warm.values().all();
  }

  putVm(v: VmRecord): JournalOp {
    return { type: 'put', sub: this.vms, key: vmKey(v.vmid), value: v };
  }

  delVm(vmid: number): JournalOp {
    return { type: 'del', sub: this.vms, key: vmKey(vmid) };
  }

  putImage(i: ImageRecord): JournalOp {
    return { type: 'put', sub: this.images, key: i.image_id, value: i };
  }

  delImage(id: string): JournalOp {
    return { type: 'del', sub: this.images, key: id };
  }

  putWarm(w: WarmStateRecord): JournalOp {
    return { type: 'put', sub: this.warm, key: w.id, value: w };
  }

  delWarm(id: string): JournalOp {
    return { type: 'del', sub: this.warm, key: id };
  }

  delDocs(vmid: number): JournalOp {
    return { type: 'del', sub: this.docs, key: vmKey(vmid) };
  }

  async write(ops: JournalOp[]): Promise<void> {
    if (ops.length) await this.store.batch(ops);
  }

  /** Intent key: unique, time-ordered. */
  static intentKey(what: string): string {
    return `${Date.now().toString(36).padStart(10, '0')}-${what}-${Math.random().toString(36).slice(2, 8)}`;
  }
}
