/**
 * The VM service: the spec's rules for VMs on QEMU (states and 409s, image
 * minimums, cloud-init settings, disks, warm states, templates), with a lock
 * per resource, crash-safe changes through the intent journal, and long work
 * as tasks. Response shapes and decisions: docs/vms.md.
 *
 * ## Service API for other domains (sandboxes)
 *
 * Another domain that runs VMs (the sandboxes domain) uses this class, never
 * a second driver. It receives this domain's instance in the domain list
 * (daemon/domains.ts) and calls `service()` on it (index.ts). `ctx`
 * is a NoteSink (`noNotes` outside a request); `o = { owner }` is the calling
 * domain's marker (e.g. `{ owner: 'sandbox' }`) and must be passed on every
 * call for its VMs:
 *
 *   create(input, ctx, { owner, labels })      VM from an image; input is POST /vms's
 *                                              arguments (seed_data, skip_rekey, cpu_cores,
 *                                              memory_mb, disk_size_gb...); owners get a linked
 *                                              clone unless input.linked_clone is false. The
 *                                              identity (hostname, machine-id, SSH host keys,
 *                                              /etc/svc/seed) is written by the first start,
 *                                              before the guest boots. Returns { vm, task }.
 *   restoreWarmState(id, { name, vmid?, seed_data?, skip_rekey?, labels?, autostart? }, ctx, o)
 *                                              new VM on a linked clone of the warm state's
 *                                              disk, resumed from its memory: running when it
 *                                              returns; its own hostname, machine-id, seed and
 *                                              SSH host keys are set through the guest agent
 *                                              right after the resume. { vm, resume_ms, identity }
 *   start / stop / suspend / resume / remove (vmid, ctx, o)
 *   exec(vmid, command, timeoutSeconds, ctx, o)          through the guest agent
 *   waitReady(vmid, timeoutSeconds, o)                   running and the agent answers
 *   saveWarmState(vmid, name, ctx, { owner, wait: true }) resolves when saved
 *   warmStates({ owner, image_id })                      warm states per image
 *   deleteWarmState(id, ctx, o)
 *   get(vmid, o) / listOwned(owner)                      views of the VMs
 *   guestInfo(vmid)                                      what GET /system/allocation counts
 *
 * `owner` marks VMs (and warm states) as belonging to that domain: the /vms
 * endpoints neither list nor act on them (404, as if absent), and the vms
 * domain's `guests` port leaves them out, so the owning domain reports them
 * itself (guestInfo helps). Their vmids share the one VM id space.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { PoolConfig } from '../config.js';
import type { GuestInfo } from '../domain.js';
import { ApiError, badRequest, conflict, forbidden, internal, notFound, unavailable } from '../lib/errors.js';
import { KeyedLock, lockLabels } from '../lib/lock.js';
import { nextDocs } from '../lib/docs.js';
import type { NoteSink } from '../lib/caller.js';
import { actorOf } from '../lib/operator.js';
import type { PauseHook } from '../lib/test-pause.js';
import type { TaskHandle, TaskRecord, Tasks } from '../lib/tasks.js';
import type { SecretStore } from '../lib/secrets.js';
import { ensureAvailable } from '../lib/availability.js';
import type { JournalOp } from '../lib/journal.js';
import type { ExecResult } from '../lib/exec-output.js';
import { formatSize, GiB } from './sizes.js';
import { checkGateway, withPrefix } from '../../api/registry/schema.js';
import { AgentError, AgentTimeout, NoExtRoot, type CloudInitSettings, type MachineRef, type MachineSpec, type NetSpec, type VmDriver } from './driver.js';
import { VmRecords, vmKey, WARM_FORMAT, type DiskRecord, type ImageRecord, type NetworkType, type StoredCloudInit, type VmIntent, type VmRecord, type WarmStateRecord } from './records.js';
import type { VmSettings } from './settings.js';
import { validBridgeName } from './settings.js';
import {
  belowMinimum, checkSshKey, checkUsername, freeLoopbackPort, hostnameOf, newUuid, now, poolOf, randomHex, sleep,
  vmDir, warmDir, WARM_ID,
} from './common.js';

export interface VmEnv {
  records: VmRecords;
  driver: VmDriver;
  tasks: Tasks;
  secrets: SecretStore;
  settings: VmSettings;
  pools: PoolConfig[];
  dataDir: string;
  /** Where each running VM's sockets, pidfile and serial log live (`<runBase>/vm-<vmid>/`). */
  runBase: string;
  log: Logger;
  env: NodeJS.ProcessEnv;
  /** The crash tests' pause hook (daemon/lib/test-pause.ts); none in tests that build the service by hand. */
  pause?: PauseHook;
}

export type VmState = 'creating' | 'stopped' | 'running' | 'paused' | 'suspended';

export interface VmView {
  vmid: number;
  name: string;
  state: VmState;
  image_id: string;
  storage_id: string;
  linked_clone: boolean;
  warm_state_id: string | null;
  cpu_cores: number;
  memory_mb: number;
  disk_size_gb: number;
  /** The root disk's qcow2 layers in the VM's directory, oldest first; the last is the one the VM writes. */
  root_layers: string[];
  autostart: boolean;
  disks: Array<{ disk_id: string; size_gb: number }>;
  network: { type: NetworkType; bridge: string | null; mac: string | null; ssh_port: number | null };
  cloud_init: Omit<StoredCloudInit, 'generation'>;
  identity: VmRecord['identity'];
  /**
   * The guid of the VM's generation ID device (QEMU's vmgenid): kept across
   * restarts, suspends and resumes, new for every VM resumed from a warm state;
   * null while the VM runs (or sleeps) on a machine started before the device existed.
   */
  generation_id: string | null;
  owner: string | null;
  labels: Record<string, string>;
  task_id: string | null;
  created_at: string;
  updated_at: string;
}

export interface CreateInput {
  name: string;
  image_id: string;
  cpu_cores?: number;
  memory_mb?: number;
  disk_size_gb?: number;
  username?: string;
  ssh_public_key?: string;
  storage_id?: string;
  vmid?: number;
  package_upgrade?: boolean;
  ssh_password_auth?: boolean;
  dns_servers?: string[] | null;
  ip_address?: string;
  gateway?: string;
  autostart?: boolean;
  linked_clone?: boolean;
  seed_data?: string;
  skip_rekey?: boolean;
}

export interface OwnerOpts {
  /** The owning domain's marker; undefined/null for /vms callers (who see only unowned VMs). */
  owner?: string | null;
}

export interface CloudInitUpdate {
  cloud_init_enabled?: boolean | null;
  username?: string | null;
  ssh_public_key?: string | null;
  password?: string | null;
  clear_password?: boolean | null;
  ssh_enabled?: boolean | null;
  ssh_password_auth?: boolean | null;
  dns_servers?: string[] | null;
  ip_address?: string | null;
  gateway?: string | null;
  package_upgrade?: boolean | null;
  network_type?: 'bridged' | 'none' | null;
  network_bridge?: string | null;
}

const SEED_NS = 'vms-cloudinit';
const SEED_MAX = 64 * 1024;
const TEMPLATE_BUILD_OWNER = 'template-build';

/** How the domain's lock keys read in a 409 (`VM 101 is busy: clone to VM 102 in progress`). */
export const VM_LOCK_LABELS = lockLabels({ vm: (id) => `VM ${id}`, image: (id) => `image '${id}'`, ws: (id) => `warm state '${id}'`, iso: (id) => `ISO '${id}'` });

/** A disk chain the driver refused to open (qemu/img.ts DiskChainEscape). */
const isChainEscape = (err: unknown): boolean => (err as Error)?.name === 'DiskChainEscape';

/** Why a warm state cannot be resumed (a 409's message), or null. */
export function warmRefusal(w: WarmStateRecord): string | null {
  if ((w.format ?? 1) < WARM_FORMAT) {
    return `warm state '${w.id}' was saved before VMs had a VM generation ID device: a VM resumed from it could not be told to renew its randomness, so it is not resumed; delete it and save a new one from a running VM`;
  }
  return null;
}

/** Maps agent failures to the API's statuses (503 no answer, 500 an agent error). */
export function agentFailure(vmid: number, err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof AgentTimeout || (err as NodeJS.ErrnoException)?.code === 'ECONNREFUSED' || (err as NodeJS.ErrnoException)?.code === 'ENOENT') {
    return unavailable(`the guest agent of VM ${vmid} does not answer (is qemu-guest-agent installed and running in the guest?)`);
  }
  if (err instanceof AgentError) return internal(`VM ${vmid}: ${err.message}`);
  return internal(`VM ${vmid}: ${(err as Error)?.message ?? String(err)}`);
}

export class VmService {
  readonly lock = new KeyedLock(VM_LOCK_LABELS);
  /** vmids being created (not yet in the store). */
  private readonly reserved = new Set<number>();
  /** Image ids a create in progress is cloning from (move/delete wait for them). */
  readonly imageUsers = new Map<string, number>();
  /** Warm states restores are resuming from (several at once; a delete waits for none). */
  private readonly warmUsers = new Map<string, number>();
  private readonly addrCache = new Map<number, { at: number; addresses: string[] }>();
  private closed = false;

  constructor(readonly e: VmEnv) {}

  // ------------------------------------------------------------ helpers

  get records(): VmRecords {
    return this.e.records;
  }

  get driver(): VmDriver {
    return this.e.driver;
  }

  /** The crash tests' pause: with HOSTD_TEST_PAUSE_AT=vms.<step> a change stops for good at that step. */
  step(name: string): Promise<void> {
    return this.e.pause?.(name) ?? Promise.resolve();
  }

  ref(vmid: number): MachineRef {
    return { name: `vm-${vmid}`, runDir: this.runDir(vmid) };
  }

  runDir(vmid: number): string {
    return path.join(this.e.runBase, `vm-${vmid}`);
  }

  pool(id: string, arg?: string): PoolConfig {
    return poolOf(this.e.pools, id, arg);
  }

  poolOfPath(file: string): PoolConfig | undefined {
    return this.e.pools.find((p) => file.startsWith(p.path + path.sep));
  }

  /** 503 naming the first missing program among `names`. */
  async requirePrograms(...names: string[]): Promise<void> {
    await ensureAvailable(this.driver, names);
  }

  /** The VM as the caller may see it: 404 for unknown ids and for VMs of another owner. */
  async vm(vmid: number, o: OwnerOpts = {}): Promise<VmRecord> {
    const rec = await this.records.vm(vmid);
    if (!rec || (rec.owner ?? null) !== (o.owner ?? null)) throw notFound(`VM ${vmid} not found`);
    return rec;
  }

  async state(rec: VmRecord): Promise<VmState> {
    if (rec.state === 'creating') return 'creating';
    const st = await this.driver.status(this.ref(rec.vmid));
    if (st.running) return st.status === 'running' || st.status === 'unknown' ? 'running' : 'paused';
    return rec.state;
  }

  view(rec: VmRecord, state: VmState): VmView {
    const { generation: _g, ...ci } = rec.cloud_init;
    void _g;
    return {
      vmid: rec.vmid,
      name: rec.name,
      state,
      image_id: rec.image_id,
      storage_id: rec.storage_id,
      linked_clone: rec.linked_clone,
      warm_state_id: rec.base_warm_state_id,
      cpu_cores: rec.cpu_cores,
      memory_mb: rec.memory_mb,
      disk_size_gb: rec.disk_size_gb,
      root_layers: [...rec.root_layers],
      autostart: rec.autostart,
      disks: rec.disks.map((d) => ({ disk_id: d.disk_id, size_gb: d.size_gb })),
      network: {
        type: rec.cloud_init.network_type,
        bridge: rec.cloud_init.network_type === 'bridged' ? rec.cloud_init.network_bridge ?? this.e.settings.bridge : null,
        mac: rec.cloud_init.network_type === 'none' ? null : rec.mac,
        ssh_port: state === 'running' || state === 'paused' ? rec.ssh_port : null,
      },
      cloud_init: ci,
      identity: rec.identity,
      generation_id: rec.vmgenid ?? null,
      owner: rec.owner,
      labels: rec.labels,
      task_id: rec.task_id,
      created_at: rec.created_at,
      updated_at: rec.updated_at,
    };
  }

  async viewOf(rec: VmRecord): Promise<VmView> {
    return this.view(rec, await this.state(rec));
  }

  private async save(rec: VmRecord): Promise<void> {
    rec.updated_at = now();
    await this.records.vms.put(vmKey(rec.vmid), rec);
  }

  /**
   * Reserves a vmid until its record is written. Allocations run one at a
   * time, and the reservations are copied before the records are read: a
   * create that commits its record (and drops its reservation) while this one
   * reads would otherwise be in neither, and its vmid handed out twice.
   */
  private allocVmid(wanted: number | undefined): Promise<number> {
    return this.lock.run(['vmid-alloc'], () => this.allocVmidNow(wanted));
  }

  private async allocVmidNow(wanted: number | undefined): Promise<number> {
    if (wanted !== undefined) {
      if (!Number.isInteger(wanted) || wanted < 1 || wanted > 999_999_999) throw badRequest("argument 'vmid' must be 1-999999999");
      if (this.reserved.has(wanted) || (await this.records.vm(wanted))) throw conflict(`vmid ${wanted} is taken`);
      this.reserved.add(wanted);
      return wanted;
    }
    // Only allocation adds reservations, so the copy covers every one that can exist until this returns.
    const held = new Set(this.reserved);
    const used = new Set((await this.records.allVms()).map((v) => v.vmid));
    let id = this.e.settings.vmidMin;
    while (used.has(id) || held.has(id)) id++;
    this.reserved.add(id);
    return id;
  }

  /** The image by id, 404 naming it (and hinting at the catalog when it is downloadable). */
  async image(id: string, catalogHint?: (id: string) => boolean): Promise<ImageRecord> {
    const img = await this.records.image(id);
    if (img) return img;
    if (catalogHint?.(id)) {
      throw notFound(`image '${id}' is in the download catalog but not on this host; download it first (POST /templates with base_image_id '${id}', or hostctl vm image fetch ${id})`);
    }
    throw notFound(`image '${id}' not found`);
  }

  private useImage(id: string): () => void {
    this.imageUsers.set(id, (this.imageUsers.get(id) ?? 0) + 1);
    return () => {
      const n = (this.imageUsers.get(id) ?? 1) - 1;
      if (n <= 0) this.imageUsers.delete(id);
      else this.imageUsers.set(id, n);
    };
  }

  private async hostLimits(cpu: number, mem: number): Promise<void> {
    if (cpu > 255) throw badRequest("argument 'cpu_cores' must be at most 255");
    const h = await this.driver.resources();
    if (mem > h.memoryTotalMb) throw badRequest(`argument 'memory_mb' (${mem}) is more than the host's ${h.memoryTotalMb} MiB`);
  }

  // ------------------------------------------------------------ create

  /**
   * POST /vms. A linked clone is ready when this returns; a full copy answers
   * at once with the VM in state `creating` and the copy's task.
   */
  async create(a: CreateInput, ctx: NoteSink, o: OwnerOpts & { labels?: Record<string, string>; catalogHint?: (id: string) => boolean; seedUserData?: string } = {}): Promise<{ vm: VmView; task: TaskRecord | null }> {
    if (this.closed) throw unavailable('the VM domain is shutting down');
    await this.requirePrograms('qemu-img');
    const name = a.name;
    const img = await this.image(a.image_id, o.catalogHint);
    const pool = this.pool(a.storage_id ?? this.e.settings.defaultStorage);
    const s = this.e.settings;
    const pick = (v: number | undefined, min: number, def: number, arg: string): number => {
      if (v === undefined || v === 0) return min > 0 ? min : def;
      if (v < min) throw badRequest(belowMinimum(arg, v, img.image_id, String(min)));
      return v;
    };
    const cpu = pick(a.cpu_cores, img.min_cpu_cores, s.defaultCpuCores, 'cpu_cores');
    const mem = pick(a.memory_mb, img.min_memory_mb, s.defaultMemoryMb, 'memory_mb');
    const imgGb = Math.ceil(img.virtual_size_bytes / GiB);
    const minDisk = Math.max(img.min_disk_gb, imgGb);
    const disk = a.disk_size_gb === undefined || a.disk_size_gb === 0 ? (img.min_disk_gb ? minDisk : Math.max(minDisk, s.defaultDiskGb)) : a.disk_size_gb;
    if (disk < minDisk) throw badRequest(`${belowMinimum('disk_size_gb', disk, img.image_id, `${minDisk} GiB`)}${imgGb >= img.min_disk_gb ? ' (its disk size; disks cannot shrink)' : ''}`);
    await this.hostLimits(cpu, mem);
    const ci = this.initialCloudInit(a, img);
    if (a.seed_data !== undefined && Buffer.byteLength(a.seed_data) > SEED_MAX) throw badRequest(`argument 'seed_data' must be at most ${SEED_MAX} bytes`);
    const linked = a.linked_clone ?? Boolean(o.owner);
    const vmid = await this.allocVmid(a.vmid);
    const releaseImage = this.useImage(img.image_id);
    let releaseLock: (() => void) | null = null;
    try {
      releaseLock = this.lock.hold([`vm:${vmid}`], 'create');
      const t = now();
      const rec: VmRecord = {
        vmid, name, owner: o.owner ?? null, labels: o.labels ?? {}, storage_id: pool.id, dir: vmDir(pool, vmid),
        image_id: img.image_id, linked_clone: linked, base_image_id: linked ? img.image_id : null, base_warm_state_id: null,
        cpu_cores: cpu, memory_mb: mem, disk_size_gb: disk, autostart: a.autostart ?? false,
        state: 'creating', root_layers: ['root.qcow2'], disks: [], cloud_init: ci, mac: this.driver.macFor(vmid, Date.now() % 9973), uuid: newUuid(),
        ssh_port: null, identity: { method: null, pending: true, skip_rekey: a.skip_rekey ?? false, seed_written: false }, seed_generation: null,
        resume_file: null, vmgenid: newUuid(), task_id: null, created_at: t, updated_at: t,
      };
      const key = VmRecords.intentKey(`create-${vmid}`);
      if (linked) {
        await this.records.journal.begin(key, { op: 'create', vmid, dir: rec.dir });
        try {
          await this.buildDisk(rec, img, a.seed_data ?? null, null, o.seedUserData);
        } catch (err) {
          await this.undoCreate(rec);
          await this.records.journal.drop(key);
          throw err;
        }
        rec.state = 'stopped';
        rec.updated_at = now();
        await this.records.journal.commit(key, [this.records.putVm(rec)]);
        ctx.note({ summary: `VM ${vmid} '${name}' created as a linked clone of '${img.image_id}'`, target: `vms/${vmid}`, metadata: { vmid, image_id: img.image_id, linked_clone: true } });
        return { vm: this.view(rec, 'stopped'), task: null };
      }
      // Full copy: the VM shows as `creating` while its task copies the image.
      const release = releaseLock;
      releaseLock = null;
      const releaseImg = releaseImage;
      let task!: TaskRecord;
      await this.records.journal.begin(key, { op: 'create', vmid, dir: rec.dir });
      // The task's work waits until the `creating` record is written, so its commit comes after it.
      let recorded!: () => void;
      const written = new Promise<void>((r) => (recorded = r));
      task = this.e.tasks.start({ kind: 'vms.vm.create', title: `Create VM ${vmid} '${name}' (full copy of ${img.image_id})`, owner: actorOf(ctx as { caller?: { tokenName: string } }), resource: `vms/${vmid}` }, async (th) => {
        await written;
        try {
          th.log(`copying image ${img.image_id} (${formatSize(img.virtual_size_bytes)} virtual)`);
          await this.buildDisk(rec, img, a.seed_data ?? null, th, o.seedUserData);
          rec.state = 'stopped';
          rec.task_id = null;
          rec.updated_at = now();
          await this.records.journal.commit(key, [this.records.putVm(rec)]);
          th.progress(100);
          return { vmid };
        } catch (err) {
          await this.undoCreate(rec);
          await this.records.vms.del(vmKey(rec.vmid));
          await this.records.journal.drop(key);
          throw err;
        } finally {
          this.reserved.delete(vmid);
          releaseImg();
          release();
        }
      });
      rec.task_id = task.task_id;
      try {
        await this.records.vms.put(vmKey(vmid), structuredClone(rec));
      } finally {
        recorded();
      }
      ctx.note({ summary: `VM ${vmid} '${name}' being created (full copy of '${img.image_id}')`, target: `vms/${vmid}`, metadata: { vmid, image_id: img.image_id, linked_clone: false, task_id: task.task_id } });
      return { vm: this.view(rec, 'creating'), task };
    } finally {
      if (releaseLock) {
        releaseLock();
        this.reserved.delete(vmid);
        releaseImage();
      }
    }
  }

  private initialCloudInit(a: CreateInput, img: ImageRecord): StoredCloudInit {
    const s = this.e.settings;
    return {
      enabled: true,
      username: checkUsername(a.username ?? img.default_user ?? s.defaultUsername),
      ssh_public_key: a.ssh_public_key ? checkSshKey(a.ssh_public_key) : null,
      ssh_enabled: true,
      ssh_password_auth: a.ssh_password_auth ?? false,
      dns_servers: a.dns_servers ?? [],
      ip_address: a.ip_address ? withPrefix(a.ip_address) : null,
      gateway: a.gateway ? (a.ip_address ? checkGateway(a.gateway, a.ip_address) : a.gateway) : null,
      package_upgrade: a.package_upgrade ?? false,
      network_type: s.network,
      network_bridge: null,
      password_set: false,
      generation: 1,
    };
  }

  /**
   * Root disk (overlay or copy, grown to size). The identity and the seed ISO
   * are written by the first start (prepare), which keeps a linked-clone
   * create to a qcow2 overlay and a record; seed_data waits in the secret
   * store until then. A build VM's verbatim user-data is written now.
   */
  private async buildDisk(rec: VmRecord, img: ImageRecord, seed: string | null, th: TaskHandle | null, seedUserData?: string): Promise<void> {
    await fs.mkdir(rec.dir, { recursive: true, mode: 0o700 });
    await this.step('create:dir');
    const root = path.join(rec.dir, rec.root_layers[0]);
    const size = rec.disk_size_gb * GiB;
    if (rec.linked_clone) {
      await this.driver.createDisk(root, Math.max(size, img.virtual_size_bytes), img.file).catch((err) => {
        throw isChainEscape(err) ? conflict(`image '${img.image_id}' cannot be used: ${(err as Error).message}`) : err;
      });
    } else {
      await this.driver.copyDisk(img.file, root, { signal: th?.signal, onProgress: (p) => th?.progress(Math.floor(p * 0.95)) });
      if (size > img.virtual_size_bytes) await this.driver.resizeDisk(root, size);
    }
    await this.step('create:disk');
    if (seed !== null) await this.e.secrets.put(SEED_NS, `seed-${rec.vmid}`, seed);
    if (seedUserData !== undefined) await this.writeSeed(rec, seedUserData);
    await this.step('create:seed');
  }

  /** Before a cold start: the pending identity, and the seed ISO when the settings changed since it was built. */
  private async prepare(rec: VmRecord): Promise<void> {
    // A VM made before the device existed gets its generation ID at its first cold start since.
    rec.vmgenid ??= newUuid();
    if (rec.identity.pending) {
      const seed = await this.e.secrets.get(SEED_NS, `seed-${rec.vmid}`);
      await this.writeIdentity(rec, { seed, rekey: !rec.identity.skip_rekey });
      await this.step('start:identity');
    }
    if (rec.cloud_init.enabled && rec.seed_generation !== rec.cloud_init.generation) await this.writeSeed(rec);
  }

  /** Hostname, seed and re-key into the stopped root disk; cloud-init carries the seed where that is impossible. */
  private async writeIdentity(rec: VmRecord, plan: { seed: string | null; rekey: boolean }): Promise<void> {
    await this.requirePrograms('qemu-storage-daemon', 'debugfs', '/dev/fuse');
    try {
      await this.driver.writeIdentity(path.join(rec.dir, rec.root_layers[rec.root_layers.length - 1]), rec.dir, {
        seed: plan.seed, hostname: hostnameOf(rec.name, rec.vmid), rekey: plan.rekey,
      });
      rec.identity = { method: 'offline', pending: false, skip_rekey: !plan.rekey, seed_written: plan.seed !== null };
      await this.e.secrets.delete(SEED_NS, `seed-${rec.vmid}`);
    } catch (err) {
      if (isChainEscape(err)) throw conflict(`VM ${rec.vmid} was not started: ${(err as Error).message}`);
      if (!(err instanceof NoExtRoot)) throw internal(`writing the identity of VM ${rec.vmid} failed: ${(err as Error).message}`);
      if (plan.seed !== null && !rec.cloud_init.enabled) throw conflict(`cannot write seed_data for VM ${rec.vmid}: ${err.message} and cloud-init is disabled`);
      rec.identity = { method: 'cloud-init', pending: false, skip_rekey: !plan.rekey, seed_written: plan.seed !== null };
      rec.seed_generation = null;
    }
  }

  /** (Re)writes the NoCloud seed ISO from the stored settings; none when cloud-init is disabled. */
  async writeSeed(rec: VmRecord, userData?: string): Promise<void> {
    const iso = path.join(rec.dir, 'seed.iso');
    if (!rec.cloud_init.enabled) {
      await fs.rm(iso, { force: true });
      return;
    }
    const hash = rec.cloud_init.password_set ? await this.e.secrets.get(SEED_NS, `password-${rec.vmid}`) : null;
    const fallback = rec.identity.method === 'cloud-init' ? await this.e.secrets.get(SEED_NS, `seed-${rec.vmid}`) : null;
    await this.driver.writeSeed(iso, {
      settings: { ...rec.cloud_init, network_bridge: rec.cloud_init.network_bridge },
      instanceId: `hostd-${rec.vmid}-${rec.uuid.slice(0, 8)}-${rec.cloud_init.generation}`,
      hostname: hostnameOf(rec.name, rec.vmid),
      mac: rec.cloud_init.network_type === 'none' ? null : rec.mac,
      passwordHash: hash,
      seedFallback: fallback,
      userData,
    });
    rec.seed_generation = rec.cloud_init.generation;
  }

  private async undoCreate(rec: VmRecord): Promise<void> {
    await this.driver.kill(this.ref(rec.vmid)).catch(() => undefined);
    await fs.rm(rec.dir, { recursive: true, force: true });
    await fs.rm(this.runDir(rec.vmid), { recursive: true, force: true });
    await this.e.secrets.delete(SEED_NS, `seed-${rec.vmid}`).catch(() => undefined);
    await this.e.secrets.delete(SEED_NS, `password-${rec.vmid}`).catch(() => undefined);
  }

  // ------------------------------------------------------------ reads

  async list(o: OwnerOpts = {}): Promise<VmView[]> {
    const out: VmView[] = [];
    for (const rec of await this.records.allVms()) {
      if ((rec.owner ?? null) !== (o.owner ?? null)) continue;
      out.push(await this.viewOf(rec));
    }
    return out;
  }

  async get(vmid: number, o: OwnerOpts = {}): Promise<VmView> {
    return this.viewOf(await this.vm(vmid, o));
  }

  // ------------------------------------------------------------ lifecycle

  private async machineSpec(rec: VmRecord, incoming?: string): Promise<MachineSpec> {
    const h = await this.driver.host();
    let net: NetSpec;
    const ci = rec.cloud_init;
    switch (ci.network_type) {
      case 'user':
        rec.ssh_port = await freeLoopbackPort();
        net = { type: 'user', mac: rec.mac, sshPort: rec.ssh_port, restrict: this.e.settings.userNetRestrict };
        break;
      case 'bridged': {
        const bridge = ci.network_bridge ?? this.e.settings.bridge;
        if (!bridge) throw conflict(`VM ${rec.vmid} is bridged but names no bridge and no default bridge is configured (vms.bridge)`);
        // Checked again at every start: the VM may predate the rule, or the setting may have changed since.
        this.requireAllowedBridge(bridge, rec.vmid);
        try {
          await fs.access(`/sys/class/net/${bridge}/bridge`);
        } catch {
          throw conflict(`bridge '${bridge}' of VM ${rec.vmid} does not exist on this host`);
        }
        rec.ssh_port = null;
        net = { type: 'bridged', mac: rec.mac, bridge, ifupScript: await this.ifupScript(bridge) };
        break;
      }
      default:
        rec.ssh_port = null;
        net = { type: 'none' };
    }
    return {
      name: `vm-${rec.vmid}`,
      uuid: rec.uuid,
      accel: h.accel.accel,
      cpuCores: rec.cpu_cores,
      memoryMb: rec.memory_mb,
      runDir: this.runDir(rec.vmid),
      rootFile: path.join(rec.dir, rec.root_layers[rec.root_layers.length - 1]),
      disks: rec.disks.map((d) => ({ id: d.disk_id, file: d.file, slot: d.slot })),
      seedIso: rec.cloud_init.enabled ? path.join(rec.dir, 'seed.iso') : null,
      net,
      // A resume keeps the device set its memory was saved with: no device for a VM suspended before it existed.
      generationId: rec.vmgenid ?? null,
      incoming,
      tcgTbSizeMb: this.e.settings.tcgTbSizeMb,
    };
  }

  /**
   * A VM joins only the bridges the operator gave VMs (vms.bridge,
   * vms.allowed_bridges): any other bridge on the host (docker0, an app's
   * network, LXC's) would put the guest inside another domain's network.
   */
  requireAllowedBridge(bridge: string, vmid?: number): void {
    const why = this.bridgeRefusal(bridge);
    if (why) throw forbidden(vmid === undefined ? why : `VM ${vmid}: ${why}`);
  }

  bridgeRefusal(bridge: string): string | null {
    const allowed = this.e.settings.allowedBridges;
    if (allowed.includes(bridge)) return null;
    return `bridge '${bridge}' is not one VMs may join (allowed: ${allowed.length ? allowed.join(', ') : 'none'}; the settings vms.bridge and vms.allowed_bridges list them)`;
  }

  /** QEMU's tap "script": puts the new tap on the bridge. One small file per bridge in the data dir. */
  private async ifupScript(bridge: string): Promise<string> {
    if (!validBridgeName(bridge)) throw badRequest(`bridge name '${bridge}' is not valid`);
    const dir = path.join(this.e.dataDir, 'vms');
    await fs.mkdir(dir, { recursive: true });
    const file = path.join(dir, `ifup-${bridge}`);
    await fs.writeFile(file, `#!/bin/sh\nset -e\nip link set "$1" master '${bridge}'\nip link set "$1" up\n`, { mode: 0o700 });
    return file;
  }

  private async launch(rec: VmRecord, incoming?: string): Promise<void> {
    await this.requirePrograms('qemu-system-x86_64');
    for (let attempt = 0; ; attempt++) {
      const spec = await this.machineSpec(rec, incoming);
      try {
        await this.driver.start(spec);
        return;
      } catch (err) {
        // A forwarded port taken between our probe and QEMU's bind: once more with another.
        if (attempt === 0 && rec.cloud_init.network_type === 'user' && /host forwarding|hostfwd/i.test((err as Error).message)) continue;
        if (err instanceof ApiError) throw err;
        if (isChainEscape(err)) throw conflict(`VM ${rec.vmid} was not started: ${(err as Error).message}`);
        throw internal(`VM ${rec.vmid} did not start: ${(err as Error).message}`);
      }
    }
  }

  /** POST /vms/{id}/start (idempotent). Starting a suspended VM resumes it. */
  async start(vmid: number, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ vm: VmView; already_running: boolean }> {
    const rec0 = await this.vm(vmid, o);
    if (rec0.state === 'suspended' && !(await this.driver.status(this.ref(vmid))).running) {
      const r = await this.resume(vmid, ctx, o);
      return { vm: r.vm, already_running: false };
    }
    return this.lock.exclusiveOn(() => this.vm(vmid, o), [`vm:${vmid}`], 'start', async (rec) => {
      if (rec.state === 'creating') throw conflict(`VM ${vmid} is still being created (task ${rec.task_id})`);
      const st = await this.driver.status(this.ref(vmid));
      if (st.running) {
        if (st.status !== 'running' && st.status !== 'unknown' && st.status !== 'inmigrate') await this.driver.cont(this.ref(vmid)).catch(() => undefined);
        return { vm: await this.viewOf(rec), already_running: true };
      }
      await this.prepare(rec);
      await this.save(rec);
      await this.launch(rec);
      await this.save(rec);
      ctx.note({ summary: `VM ${vmid} '${rec.name}' started`, target: `vms/${vmid}`, metadata: { vmid } });
      return { vm: this.view(rec, 'running'), already_running: false };
    });
  }

  /**
   * POST /vms/{id}/stop (idempotent): ACPI power-down, hard stop after
   * `timeoutSeconds` (default the setting vms.stop_grace_seconds); `force`
   * powers off at once without asking the guest. A suspended VM's saved memory is dropped.
   */
  async stop(vmid: number, ctx: NoteSink, o: OwnerOpts & { force?: boolean; timeoutSeconds?: number } = {}): Promise<{ vm: VmView; stopped_by: 'acpi' | 'forced' | 'already-stopped' | 'discarded-suspend' }> {
    return this.lock.exclusiveOn(() => this.vm(vmid, o), [`vm:${vmid}`], 'stop', async (rec) => {
      if (rec.state === 'creating') throw conflict(`VM ${vmid} is still being created (task ${rec.task_id})`);
      const grace = o.timeoutSeconds === undefined ? this.e.settings.stopGraceMs : o.timeoutSeconds * 1000;
      const how = o.force ? await this.powerOff(vmid) : await this.driver.stop(this.ref(vmid), grace);
      if (how === 'not-running') {
        if (rec.state === 'suspended') {
          const file = rec.resume_file;
          rec.state = 'stopped';
          rec.resume_file = null;
          await this.save(rec);
          if (file) await fs.rm(file, { force: true });
          ctx.note({ summary: `VM ${vmid} '${rec.name}' stopped (its suspended memory was dropped)`, target: `vms/${vmid}`, metadata: { vmid } });
          return { vm: this.view(rec, 'stopped'), stopped_by: 'discarded-suspend' as const };
        }
        return { vm: this.view(rec, 'stopped'), stopped_by: 'already-stopped' as const };
      }
      await this.save(rec);
      const words = how === 'acpi' ? 'ACPI power-down' : o.force ? 'force: powered off at once' : `hard stop after ${grace / 1000} s without an ACPI power-down`;
      ctx.note({ summary: `VM ${vmid} '${rec.name}' stopped (${words})`, target: `vms/${vmid}`, metadata: { vmid, stopped_by: how, force: o.force ?? false } });
      return { vm: this.view(rec, 'stopped'), stopped_by: how };
    });
  }

  /** Power off now, as `qm stop` does: the guest is not asked. */
  private async powerOff(vmid: number): Promise<'forced' | 'not-running'> {
    if (!(await this.driver.status(this.ref(vmid))).running) return 'not-running';
    await this.driver.kill(this.ref(vmid));
    return 'forced';
  }

  /** POST /vms/{id}/suspend (idempotent): memory to `<dir>/suspend.state`, the process ends. */
  async suspend(vmid: number, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ vm: VmView; already_suspended: boolean; saved_bytes: number }> {
    return this.lock.exclusiveOn(() => this.vm(vmid, o), [`vm:${vmid}`], 'suspend', async (rec) => {
      const st = await this.driver.status(this.ref(vmid));
      if (!st.running) {
        if (rec.state === 'suspended') return { vm: this.view(rec, 'suspended'), already_suspended: true, saved_bytes: 0 };
        throw conflict(`VM ${vmid} is ${rec.state}: only a running VM can be suspended`);
      }
      const file = path.join(rec.dir, 'suspend.state');
      const part = `${file}.part`;
      const key = VmRecords.intentKey(`suspend-${vmid}`);
      await this.records.journal.begin(key, { op: 'suspend', vmid, file });
      let saved: { bytes: number };
      try {
        saved = await this.driver.saveMemory(this.ref(vmid), part);
        await this.step('suspend:saved');
        await this.driver.kill(this.ref(vmid));
        await fs.rename(part, file);
      } catch (err) {
        await fs.rm(part, { force: true });
        const now2 = await this.driver.status(this.ref(vmid));
        if (now2.running && now2.status !== 'running') await this.driver.cont(this.ref(vmid)).catch(() => undefined);
        await this.records.journal.drop(key);
        throw err instanceof ApiError ? err : internal(`suspending VM ${vmid} failed: ${(err as Error).message}`);
      }
      rec.state = 'suspended';
      rec.resume_file = file;
      rec.updated_at = now();
      await this.records.journal.commit(key, [this.records.putVm(rec)]);
      ctx.note({ summary: `VM ${vmid} '${rec.name}' suspended (${formatSize(saved.bytes)} of memory saved)`, target: `vms/${vmid}`, metadata: { vmid, bytes: saved.bytes } });
      return { vm: this.view(rec, 'suspended'), already_suspended: false, saved_bytes: saved.bytes };
    });
  }

  /** POST /vms/{id}/resume: from the suspend file (idempotent for a running VM; 409 for a stopped one). */
  async resume(vmid: number, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ vm: VmView; already_running: boolean }> {
    return this.lock.exclusiveOn(() => this.vm(vmid, o), [`vm:${vmid}`], 'resume', async (rec) => {
      const st = await this.driver.status(this.ref(vmid));
      if (st.running) {
        if (st.status === 'paused') await this.driver.cont(this.ref(vmid));
        return { vm: await this.viewOf(rec), already_running: true };
      }
      if (rec.state !== 'suspended') throw conflict(`VM ${vmid} is ${rec.state}, not suspended: start it instead`);
      if (!rec.resume_file || !(await fs.stat(rec.resume_file).catch(() => null))) {
        throw conflict(`VM ${vmid} is suspended but its saved memory is gone: stop it to drop the suspend, then start it`);
      }
      const file = rec.resume_file;
      const key = VmRecords.intentKey(`resume-${vmid}`);
      await this.records.journal.begin(key, { op: 'resume', vmid, file });
      try {
        await this.launch(rec, file);
      } catch (err) {
        await this.records.journal.drop(key);
        throw err;
      }
      await this.step('resume:started');
      rec.state = 'stopped';
      rec.resume_file = null;
      rec.updated_at = now();
      await this.records.journal.commit(key, [this.records.putVm(rec)]);
      await fs.rm(file, { force: true });
      void this.syncClock(vmid);
      ctx.note({ summary: `VM ${vmid} '${rec.name}' resumed`, target: `vms/${vmid}`, metadata: { vmid } });
      return { vm: this.view(rec, 'running'), already_running: false };
    });
  }

  /** After a resume the guest clock is as old as the save: set it from the host (best effort). */
  private async syncClock(vmid: number): Promise<void> {
    try {
      await this.driver.agent(this.ref(vmid), 'guest-set-time', { time: Date.now() * 1_000_000 }, 5000);
    } catch {
      /* no agent (yet): the guest's NTP catches up */
    }
  }

  /** DELETE /vms/{id}: a running VM is hard-stopped first (no graceful shutdown), then its files go. */
  async remove(vmid: number, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ deleted: VmView; was_running: boolean }> {
    return this.lock.exclusiveOn(() => this.vm(vmid, o), [`vm:${vmid}`], 'delete', async (rec) => {
      if (rec.state === 'creating') throw conflict(`VM ${vmid} is still being created (task ${rec.task_id})`);
      const state = await this.state(rec);
      const key = VmRecords.intentKey(`delete-${vmid}`);
      await this.records.journal.begin(key, { op: 'delete', vmid, dir: rec.dir });
      await this.driver.kill(this.ref(vmid));
      await this.step('delete:stopped');
      await this.undoCreate(rec);
      await this.records.journal.commit(key, [this.records.delVm(vmid), this.records.delDocs(vmid)]);
      this.addrCache.delete(vmid);
      ctx.note({ summary: `VM ${vmid} '${rec.name}' deleted${state === 'running' || state === 'paused' ? ' (it was running: hard-stopped)' : ''}`, target: `vms/${vmid}`, metadata: { vmid } });
      return { deleted: this.view(rec, 'stopped'), was_running: state === 'running' || state === 'paused' };
    });
  }

  /** PATCH /vms/{id}: CPU, memory, autostart of a stopped VM. */
  async update(vmid: number, a: { cpu_cores?: number | null; memory_mb?: number | null; autostart?: boolean | null }, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ vm: VmView }> {
    return this.lock.exclusiveOn(() => this.vm(vmid, o), [`vm:${vmid}`], 'update', async (rec) => {
      const state = await this.state(rec);
      if (state !== 'stopped') throw conflict(`VM ${vmid} is ${state}: stop it before changing CPU, memory or autostart`);
      const img = await this.records.image(rec.image_id);
      const changed: string[] = [];
      if (a.cpu_cores != null) {
        if (a.cpu_cores < 1) throw badRequest("argument 'cpu_cores' must be at least 1");
        if (img && a.cpu_cores < img.min_cpu_cores) throw badRequest(belowMinimum('cpu_cores', a.cpu_cores, img.image_id, String(img.min_cpu_cores)));
        rec.cpu_cores = a.cpu_cores;
        changed.push('cpu_cores');
      }
      if (a.memory_mb != null) {
        if (a.memory_mb < 64) throw badRequest("argument 'memory_mb' must be at least 64");
        if (img && a.memory_mb < img.min_memory_mb) throw badRequest(belowMinimum('memory_mb', a.memory_mb, img.image_id, String(img.min_memory_mb)));
        rec.memory_mb = a.memory_mb;
        changed.push('memory_mb');
      }
      await this.hostLimits(rec.cpu_cores, rec.memory_mb);
      if (a.autostart != null) {
        rec.autostart = a.autostart;
        changed.push('autostart');
      }
      await this.save(rec);
      ctx.note({ summary: `VM ${vmid} '${rec.name}' updated${changed.length ? ': ' + changed.join(', ') : ' (no change)'}`, target: `vms/${vmid}`, metadata: { vmid, changed, cpu_cores: rec.cpu_cores, memory_mb: rec.memory_mb, autostart: rec.autostart } });
      return { vm: this.view(rec, 'stopped') };
    });
  }

  // ------------------------------------------------------------ clone

  /** POST /vms/{id}/clone: `id` is the new VM's id; the stopped source's root disk is copied (flattened) by a task. */
  async clone(newId: number, sourceId: number, name: string, ctx: NoteSink & { caller?: { tokenName: string } }, o: OwnerOpts = {}): Promise<{ vm: VmView; task: TaskRecord }> {
    await this.requirePrograms('qemu-img', 'genisoimage');
    const nm = name;
    const src = await this.vm(sourceId, o);
    if (newId === sourceId) throw conflict(`vmid ${newId} is taken (by the source VM itself); the path id names the new VM`);
    const vmid = await this.allocVmid(newId);
    let releaseAll: (() => void) | null = null;
    try {
      releaseAll = this.lock.hold([`vm:${sourceId}`, `vm:${vmid}`], `clone to VM ${vmid}`);
      const state = await this.state(src);
      if (state !== 'stopped') throw conflict(`source VM ${sourceId} is ${state}: clone needs a stopped VM`);
      const pool = this.pool(src.storage_id);
      const t = now();
      const rec: VmRecord = {
        ...structuredClone(src),
        vmid, name: nm, dir: vmDir(pool, vmid), linked_clone: false, base_image_id: null, base_warm_state_id: null,
        state: 'creating', root_layers: ['root.qcow2'], disks: [], mac: this.driver.macFor(vmid, Date.now() % 9973), uuid: newUuid(), ssh_port: null,
        identity: { method: null, pending: true, skip_rekey: false, seed_written: false }, seed_generation: null, resume_file: null, vmgenid: newUuid(), task_id: null, created_at: t, updated_at: t,
        cloud_init: { ...src.cloud_init, password_set: false, generation: 1 },
      };
      const srcRoot = path.join(src.dir, src.root_layers[src.root_layers.length - 1]);
      const key = VmRecords.intentKey(`create-${vmid}`);
      await this.records.journal.begin(key, { op: 'create', vmid, dir: rec.dir });
      const release = releaseAll;
      releaseAll = null;
      let recorded!: () => void;
      const written = new Promise<void>((r) => (recorded = r));
      const task = this.e.tasks.start({ kind: 'vms.vm.clone', title: `Clone VM ${sourceId} to VM ${vmid} '${nm}'`, owner: actorOf(ctx), resource: `vms/${vmid}` }, async (th) => {
        await written;
        try {
          await fs.mkdir(rec.dir, { recursive: true, mode: 0o700 });
          await this.step('clone:dir');
          th.log(`copying the root disk of VM ${sourceId}`);
          await this.driver.copyDisk(srcRoot, path.join(rec.dir, 'root.qcow2'), { signal: th.signal, onProgress: (p) => th.progress(Math.floor(p * 0.9)) });
          await this.step('clone:copied');
          rec.state = 'stopped';
          rec.task_id = null;
          rec.updated_at = now();
          await this.records.journal.commit(key, [this.records.putVm(rec)]);
          th.progress(100);
          return { vmid, source_vmid: sourceId };
        } catch (err) {
          await this.undoCreate(rec);
          await this.records.vms.del(vmKey(vmid));
          await this.records.journal.drop(key);
          throw err;
        } finally {
          this.reserved.delete(vmid);
          release();
        }
      });
      rec.task_id = task.task_id;
      try {
        await this.records.vms.put(vmKey(vmid), structuredClone(rec));
      } finally {
        recorded();
      }
      ctx.note({ summary: `VM ${sourceId} being cloned to VM ${vmid} '${nm}'`, target: `vms/${vmid}`, metadata: { vmid, source_vmid: sourceId, task_id: task.task_id } });
      return { vm: this.view(rec, 'creating'), task };
    } finally {
      if (releaseAll) {
        releaseAll();
        this.reserved.delete(vmid);
      }
    }
  }

  // ------------------------------------------------------------ cloud-init

  /** POST /vms/{id}/cloud-init: omitted/null keeps; empty string or array clears; the seed is rebuilt. */
  async cloudInit(vmid: number, a: CloudInitUpdate, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ vm: VmView; applies: 'next boot' }> {
    return this.lock.exclusiveOn(() => this.vm(vmid, o), [`vm:${vmid}`], 'cloud-init update', async (rec) => {
      if (rec.state === 'creating') throw conflict(`VM ${vmid} is still being created (task ${rec.task_id})`);
      const ci: StoredCloudInit = { ...rec.cloud_init, dns_servers: [...rec.cloud_init.dns_servers] };
      const changed: string[] = [];
      const set = <K extends keyof CloudInitSettings>(k: K, v: StoredCloudInit[K]) => {
        ci[k] = v;
        changed.push(k);
      };
      if (a.password != null && a.clear_password) throw badRequest("arguments 'password' and 'clear_password' cannot be combined");
      if (a.cloud_init_enabled != null) set('enabled', a.cloud_init_enabled);
      if (a.username != null) set('username', checkUsername(a.username));
      if (a.ssh_public_key != null) set('ssh_public_key', a.ssh_public_key === '' ? null : checkSshKey(a.ssh_public_key));
      if (a.ssh_enabled != null) set('ssh_enabled', a.ssh_enabled);
      if (a.ssh_password_auth != null) set('ssh_password_auth', a.ssh_password_auth);
      if (a.dns_servers != null) set('dns_servers', [...a.dns_servers]);
      if (a.ip_address != null) set('ip_address', a.ip_address === '' ? null : withPrefix(a.ip_address));
      if (a.gateway != null) set('gateway', a.gateway === '' ? null : a.gateway);
      if (a.package_upgrade != null) set('package_upgrade', a.package_upgrade);
      if (a.network_bridge != null) {
        if (a.network_bridge !== '') this.requireAllowedBridge(a.network_bridge);
        set('network_bridge', a.network_bridge === '' ? null : a.network_bridge);
      }
      if (a.network_type != null) set('network_type', a.network_type);
      // The pair is checked as it will be stored when the call changes either one.
      if ((a.gateway != null || a.ip_address != null) && ci.gateway && ci.ip_address) checkGateway(ci.gateway, ci.ip_address);
      if (ci.network_type === 'bridged' && !ci.network_bridge && !this.e.settings.bridge) {
        throw badRequest("argument 'network_bridge' is needed for network_type 'bridged' (no default bridge is configured)");
      }
      // A resume needs the devices the memory was saved with.
      if (rec.state === 'suspended' && a.network_type != null && (a.network_type === 'none') !== (rec.cloud_init.network_type === 'none')) {
        throw conflict(`VM ${vmid} is suspended: adding or removing its network card needs a stopped VM`);
      }
      let passwordChange: 'set' | 'cleared' | null = null;
      if (a.password != null) {
        if (a.password === '') throw badRequest("argument 'password' must not be empty (use clear_password to remove it)");
        if (a.password.length > 1024) throw badRequest("argument 'password' must be at most 1024 characters");
        await this.requirePrograms('openssl');
        await this.e.secrets.put(SEED_NS, `password-${vmid}`, await this.driver.hashPassword(a.password));
        ci.password_set = true;
        passwordChange = 'set';
      } else if (a.clear_password) {
        await this.e.secrets.delete(SEED_NS, `password-${vmid}`);
        ci.password_set = false;
        passwordChange = 'cleared';
      }
      if (passwordChange) changed.push('password');
      ci.generation += 1;
      const key = VmRecords.intentKey(`seed-${vmid}`);
      rec.cloud_init = ci;
      await this.records.journal.begin(key, { op: 'seed', vmid });
      await this.writeSeed(rec);
      rec.updated_at = now();
      await this.records.journal.commit(key, [this.records.putVm(rec)]);
      ctx.note({ summary: `VM ${vmid} '${rec.name}' cloud-init settings updated${changed.length ? ': ' + changed.join(', ') : ''}`, target: `vms/${vmid}`, metadata: { vmid, changed, password: passwordChange } });
      return { vm: await this.viewOf(rec), applies: 'next boot' as const };
    });
  }

  // ------------------------------------------------------------ guest

  private async requireRunning(rec: VmRecord, what: string): Promise<void> {
    const state = await this.state(rec);
    if (state !== 'running') throw conflict(`VM ${rec.vmid} is ${state}: ${what} needs a running VM`);
  }

  /**
   * POST /vms/{id}/exec through the guest agent: the shared ExecResult
   * (daemon/lib/exec-output.ts), each stream cut at EXEC_STREAM_CAP_BYTES in
   * the guest (qemu/exec.ts). Sandboxes use this same path.
   */
  async exec(vmid: number, command: string, timeoutSeconds: number | undefined, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ vmid: number } & ExecResult> {
    const rec = await this.vm(vmid, o);
    if (!command.trim()) throw badRequest("argument 'command' must not be empty");
    const t = timeoutSeconds ?? 60;
    if (t < 1 || t > 86400) throw badRequest("argument 'timeout_seconds' must be 1-86400");
    await this.requireRunning(rec, 'exec');
    const t0 = Date.now();
    let r;
    try {
      if (!(await this.driver.ping(this.ref(vmid), this.e.settings.agentTimeoutMs))) throw new AgentTimeout('no answer to guest-ping');
      r = await this.driver.exec(this.ref(vmid), command, t * 1000);
    } catch (err) {
      throw agentFailure(vmid, err);
    }
    ctx.note({
      summary: `Command run in VM ${vmid} '${rec.name}' ${r.timed_out ? `(timed out after ${t} s)` : `(exit ${r.exit_code})`}${r.truncated ? ', output cut' : ''}`,
      target: `vms/${vmid}`,
      metadata: { vmid, exit_code: r.exit_code, timed_out: r.timed_out, truncated: r.truncated, command_bytes: Buffer.byteLength(command) },
    });
    return { vmid, ...r, duration_ms: Date.now() - t0 };
  }

  /** POST /vms/{id}/wait-ready: running and the agent answers, or the timeout. */
  async waitReady(vmid: number, timeoutSeconds: number | undefined, o: OwnerOpts = {}) {
    const t0 = Date.now();
    const end = t0 + (timeoutSeconds ?? 60) * 1000;
    let state: VmState = 'stopped';
    for (;;) {
      const rec = await this.vm(vmid, o);
      state = await this.state(rec);
      if (state === 'running' && (await this.driver.ping(this.ref(vmid), Math.max(200, Math.min(2000, end - Date.now()))))) {
        return { vmid, ready: true, timed_out: false, state, waited_ms: Date.now() - t0, reason: null };
      }
      if (Date.now() >= end) break;
      await sleep(Math.min(250, Math.max(0, end - Date.now())));
    }
    return {
      vmid, ready: false, timed_out: true, state, waited_ms: Date.now() - t0,
      reason: state === 'running' ? 'the guest agent did not answer' : `the VM is ${state}`,
    };
  }

  /** POST /vms/{id}/wait-ip: an address the agent reports, or the timeout. */
  async waitIp(vmid: number, timeoutSeconds: number | undefined, o: OwnerOpts = {}) {
    const t0 = Date.now();
    const end = t0 + (timeoutSeconds ?? 60) * 1000;
    let state: VmState = 'stopped';
    let reason = '';
    for (;;) {
      const rec = await this.vm(vmid, o);
      state = await this.state(rec);
      if (rec.cloud_init.network_type === 'none') {
        return { vmid, ip: null, addresses: [], timed_out: false, state, waited_ms: Date.now() - t0, reason: 'the VM has no network (network_type none)' };
      }
      if (state === 'running') {
        try {
          const addrs = await this.driver.addresses(this.ref(vmid), Math.max(200, Math.min(2000, end - Date.now())));
          if (addrs.length) {
            const ip = (addrs.find((x) => x.family === 'ipv4') ?? addrs[0]).address;
            this.addrCache.set(vmid, { at: Date.now(), addresses: addrs.map((x) => x.address) });
            return { vmid, ip, addresses: addrs, timed_out: false, state, waited_ms: Date.now() - t0, reason: null };
          }
          reason = 'the guest has no address yet';
        } catch {
          reason = 'the guest agent did not answer';
        }
      } else reason = `the VM is ${state}`;
      if (Date.now() >= end) break;
      await sleep(Math.min(500, Math.max(0, end - Date.now())));
    }
    return { vmid, ip: null, addresses: [], timed_out: true, state, waited_ms: Date.now() - t0, reason };
  }

  /** GET /vms/{id}/connection: how to SSH in. */
  async connection(vmid: number, o: OwnerOpts = {}) {
    const rec = await this.vm(vmid, o);
    const state = await this.state(rec);
    const ci = rec.cloud_init;
    let host: string | null = null;
    let port: number | null = 22;
    let reason: string | null = null;
    if (ci.network_type === 'none') {
      port = null;
      reason = 'the VM has no network (network_type none)';
    } else if (ci.network_type === 'user') {
      if (state === 'running' || state === 'paused') {
        host = '127.0.0.1';
        port = rec.ssh_port;
      } else reason = `the VM is ${state}: its SSH port is forwarded while it runs`;
    } else {
      if (ci.ip_address) host = ci.ip_address.split('/')[0];
      else if (state === 'running') {
        try {
          const addrs = await this.driver.addresses(this.ref(vmid), 2000);
          host = (addrs.find((x) => x.family === 'ipv4') ?? addrs[0])?.address ?? null;
          if (!host) reason = 'the guest reports no address yet';
        } catch {
          reason = 'the guest agent does not answer, so the address is unknown';
        }
      } else reason = `the VM is ${state} and has no static address`;
    }
    return {
      vmid,
      state,
      username: ci.username,
      host,
      port,
      network_type: ci.network_type,
      key_auth: Boolean(ci.ssh_public_key),
      password_auth: ci.ssh_password_auth && ci.password_set,
      ssh_enabled: ci.ssh_enabled,
      command: host && port ? `ssh ${port === 22 ? '' : `-p ${port} `}${ci.username}@${host}` : null,
      reason,
    };
  }

  // ------------------------------------------------------------ disks

  async diskAttach(vmid: number, sizeGb: number, ctx: NoteSink, o: OwnerOpts = {}) {
    if (sizeGb < 1) throw badRequest("argument 'size_gb' must be at least 1");
    await this.requirePrograms('qemu-img');
    return this.lock.exclusiveOn(() => this.vm(vmid, o), [`vm:${vmid}`], 'disk attach', async (rec) => {
      const state = await this.state(rec);
      if (state === 'creating' || state === 'suspended' || state === 'paused') throw conflict(`VM ${vmid} is ${state}: disks can be added to a running or stopped VM`);
      const used = new Set(rec.disks.map((d) => d.slot));
      const { first: FIRST_DISK_SLOT, last: LAST_DISK_SLOT } = this.driver.diskSlots;
      let slot = FIRST_DISK_SLOT;
      while (used.has(slot)) slot++;
      if (slot > LAST_DISK_SLOT) throw conflict(`VM ${vmid} has no free disk slot (at most ${LAST_DISK_SLOT - FIRST_DISK_SLOT + 1} additional disks)`);
      let n = 1;
      while (rec.disks.some((d) => d.disk_id === `d${n}`)) n++;
      const disk: DiskRecord = { disk_id: `d${n}`, file: path.join(rec.dir, `disk-d${n}.qcow2`), size_gb: sizeGb, slot, created_at: now() };
      const key = VmRecords.intentKey(`disk-attach-${vmid}`);
      await this.records.journal.run(key, { op: 'disk-attach', vmid, disk_id: disk.disk_id, file: disk.file }, async () => {
        await this.driver.createDisk(disk.file, sizeGb * GiB);
        if (state === 'running') await this.driver.attachDisk(this.ref(vmid), { id: disk.disk_id, file: disk.file, slot });
      }, {
        commit: () => {
          rec.disks.push(disk);
          rec.updated_at = now();
          return [this.records.putVm(rec)];
        },
        rollback: async () => {
          await fs.rm(disk.file, { force: true });
        },
      });
      ctx.note({ summary: `Disk ${disk.disk_id} (${sizeGb} GiB) added to VM ${vmid}${state === 'running' ? ' (hot-plugged)' : ''}`, target: `vms/${vmid}/disks/${disk.disk_id}`, metadata: { vmid, disk_id: disk.disk_id, size_gb: sizeGb, hotplug: state === 'running' } });
      return { vmid, disk: { disk_id: disk.disk_id, size_gb: sizeGb }, hotplugged: state === 'running' };
    });
  }

  async diskGrow(vmid: number, diskId: string, sizeGb: number, ctx: NoteSink, o: OwnerOpts = {}) {
    if (sizeGb < 1) throw badRequest("argument 'size_gb' must be at least 1");
    return this.lock.exclusiveOn(() => this.vm(vmid, o), [`vm:${vmid}`], 'disk grow', async (rec) => {
      const disk = rec.disks.find((d) => d.disk_id === diskId);
      if (!disk) throw notFound(`VM ${vmid} has no disk '${diskId}'`);
      if (sizeGb <= disk.size_gb) throw badRequest(`argument 'size_gb' (${sizeGb}) must be larger than disk ${diskId}'s current ${disk.size_gb} GiB: disks only grow`);
      const state = await this.state(rec);
      if (state === 'creating' || state === 'suspended' || state === 'paused') throw conflict(`VM ${vmid} is ${state}: disks grow on a running or stopped VM`);
      const key = VmRecords.intentKey(`disk-grow-${vmid}`);
      const from = disk.size_gb;
      await this.records.journal.run(key, { op: 'disk-grow', vmid, disk_id: diskId, file: disk.file }, async () => {
        if (state === 'running') await this.driver.growDisk(this.ref(vmid), diskId, sizeGb * GiB);
        else await this.driver.resizeDisk(disk.file, sizeGb * GiB);
      }, {
        commit: () => {
          disk.size_gb = sizeGb;
          rec.updated_at = now();
          return [this.records.putVm(rec)];
        },
      });
      ctx.note({ summary: `Disk ${diskId} of VM ${vmid} grown from ${from} to ${sizeGb} GiB`, target: `vms/${vmid}/disks/${diskId}`, metadata: { vmid, disk_id: diskId, from_gb: from, size_gb: sizeGb, live: state === 'running' } });
      return { vmid, disk: { disk_id: diskId, size_gb: sizeGb }, live: state === 'running' };
    });
  }

  async diskDelete(vmid: number, diskId: string, ctx: NoteSink, o: OwnerOpts = {}) {
    return this.lock.exclusiveOn(() => this.vm(vmid, o), [`vm:${vmid}`], 'disk delete', async (rec) => {
      const disk = rec.disks.find((d) => d.disk_id === diskId);
      if (!disk) throw notFound(`VM ${vmid} has no disk '${diskId}'`);
      const state = await this.state(rec);
      if (state === 'creating' || state === 'suspended' || state === 'paused') throw conflict(`VM ${vmid} is ${state}: disks are removed from a running or stopped VM`);
      if (state === 'running') {
        try {
          await this.driver.detachDisk(this.ref(vmid), diskId, 30_000);
        } catch (err) {
          throw conflict(`the guest of VM ${vmid} did not release disk ${diskId} (${(err as Error).message}); stop the VM and delete the disk then`);
        }
      }
      const key = VmRecords.intentKey(`disk-detach-${vmid}`);
      await this.records.journal.begin(key, { op: 'disk-detach', vmid, disk_id: diskId, file: disk.file });
      await fs.rm(disk.file, { force: true });
      rec.disks = rec.disks.filter((d) => d.disk_id !== diskId);
      rec.updated_at = now();
      await this.records.journal.commit(key, [this.records.putVm(rec)]);
      ctx.note({ summary: `Disk ${diskId} of VM ${vmid} detached and deleted`, target: `vms/${vmid}/disks/${diskId}`, metadata: { vmid, disk_id: diskId, hot_unplug: state === 'running' } });
      return { vmid, deleted: { disk_id: diskId, size_gb: disk.size_gb } };
    });
  }

  // ------------------------------------------------------------ warm states

  warmView(w: WarmStateRecord, dependents: number[]) {
    const refused = warmRefusal(w);
    return {
      id: w.id, name: w.name, vmid: w.vmid, image_id: w.image_id, storage_id: w.storage_id, cpu_cores: w.cpu_cores, memory_mb: w.memory_mb,
      disk_size_gb: w.disk_size_gb, network_type: w.network_type, size_bytes: w.size_bytes, dependents, owner: w.owner, created_at: w.created_at,
      generation_id: w.vmgenid ?? null, format: w.format ?? 1, resumable: refused === null, reason: refused,
    };
  }

  /** Warm states (of `owner`), each with the VMs resting on it; `image_id` narrows to one image. */
  async warmStates(f: OwnerOpts & { image_id?: string } = {}) {
    const vms = await this.records.allVms();
    return (await this.records.allWarm())
      .filter((w) => (w.owner ?? null) === (f.owner ?? null) && (!f.image_id || w.image_id === f.image_id))
      .map((w) => this.warmView(w, vms.filter((v) => v.base_warm_state_id === w.id).map((v) => v.vmid)));
  }

  private async warmState(id: string, o: OwnerOpts): Promise<WarmStateRecord> {
    const w = WARM_ID.test(id) ? await this.records.warmState(id) : undefined;
    if (!w || (w.owner ?? null) !== (o.owner ?? null)) throw notFound(`warm state '${id}' not found`);
    return w;
  }

  /**
   * POST /vms/{id}/warm-states: memory and the root disk at the same instant;
   * the VM keeps running. A task; `wait` (service callers) resolves when saved.
   */
  async saveWarmState(vmid: number, name: string | undefined, ctx: NoteSink & { caller?: { tokenName: string } }, o: OwnerOpts & { wait?: boolean } = {}): Promise<{ task: TaskRecord; warm_state_id: string; warm_state?: ReturnType<VmService['warmView']> }> {
    const rec0 = await this.vm(vmid, o);
    const wsName = name ?? rec0.name;
    const release = this.lock.hold([`vm:${vmid}`], 'warm-state save');
    let started = false;
    try {
      const rec = await this.vm(vmid, o);
      const state = await this.state(rec);
      if (state !== 'running') throw conflict(`VM ${vmid} is ${state}: only a running VM can be saved as a warm state`);
      if (rec.disks.length) throw conflict(`VM ${vmid} has additional disks (${rec.disks.map((d) => d.disk_id).join(', ')}): warm states cover VMs with only a root disk`);
      // QEMU's answer, not the record's: the machine that runs is what the memory will need.
      const generationId = await this.driver.generationId(this.ref(vmid));
      if (generationId === null) {
        throw conflict(`VM ${vmid} runs on a machine without a VM generation ID device (started before hostd added one): VMs resumed from its warm state could not be told to renew their randomness; stop and start it, then save the warm state`);
      }
      const id = `ws-${randomHex(6)}`;
      const pool = this.pool(rec.storage_id);
      const dir = warmDir(pool, id);
      const newLayer = `root.${randomHex(4)}.qcow2`;
      const w: WarmStateRecord = {
        id, name: wsName, vmid, owner: rec.owner, image_id: rec.image_id, storage_id: pool.id, dir,
        memory_file: path.join(dir, 'memory.state'), disk_file: path.join(dir, 'disk.qcow2'),
        base_image_id: rec.base_image_id, base_warm_state_id: rec.base_warm_state_id,
        cpu_cores: rec.cpu_cores, memory_mb: rec.memory_mb, disk_size_gb: rec.disk_size_gb, network_type: rec.cloud_init.network_type,
        cloud_init: { ...rec.cloud_init }, size_bytes: 0, created_at: now(), format: WARM_FORMAT, vmgenid: generationId,
      };
      const task = this.e.tasks.start({ kind: 'vms.warm-state.save', title: `Save VM ${vmid} '${rec.name}' as warm state ${id}`, owner: actorOf(ctx), resource: `vms/${vmid}` }, async (th) => {
        try {
          return await this.doWarmSave(rec, w, newLayer, th);
        } finally {
          release();
        }
      });
      started = true;
      ctx.note({ summary: `VM ${vmid} '${rec.name}' being saved as warm state ${id}`, target: `vms/${vmid}`, metadata: { vmid, warm_state_id: id, task_id: task.task_id } });
      if (o.wait) {
        const done = await this.e.tasks.settled(task.task_id);
        if (done.state !== 'succeeded') throw internal(`saving the warm state failed: ${done.error}`);
        const saved = await this.records.warmState(id);
        return { task: done, warm_state_id: id, warm_state: saved ? this.warmView(saved, []) : undefined };
      }
      return { task, warm_state_id: id };
    } finally {
      if (!started) release();
    }
  }

  private async doWarmSave(rec: VmRecord, w: WarmStateRecord, newLayer: string, th: TaskHandle) {
    const ref = this.ref(rec.vmid);
    const key = VmRecords.intentKey(`warm-save-${w.id}`);
    await this.records.journal.begin(key, { op: 'warm-save', vmid: rec.vmid, id: w.id, name: w.name, dir: w.dir, new_layer: newLayer, vmgenid: w.vmgenid });
    let snapped = false;
    try {
      await fs.mkdir(w.dir, { recursive: true, mode: 0o700 });
      th.log('saving guest memory');
      th.progress(5);
      const saved = await this.driver.saveMemory(ref, `${w.memory_file}.part`);
      th.log(`memory saved (${formatSize(saved.bytes)} in ${saved.ms} ms); freezing the disk`);
      th.progress(70);
      await this.step('warm:saved');
      const frozen = await this.driver.snapshotRoot(ref, path.join(rec.dir, newLayer), `root-${newLayer.split('.')[1]}`);
      snapped = true;
      rec.root_layers.push(newLayer);
      rec.updated_at = now();
      await this.records.vms.put(vmKey(rec.vmid), rec);
      await this.step('warm:snapshot');
      await this.driver.cont(ref);
      th.progress(85);
      // The frozen layer is never written again: a second name for it belongs to the warm state.
      await fs.link(frozen, w.disk_file);
      await fs.rename(`${w.memory_file}.part`, w.memory_file);
      await this.step('warm:linked');
      w.size_bytes = (await fs.stat(w.memory_file)).size + (await fs.stat(w.disk_file)).size;
      await this.records.journal.commit(key, [this.records.putWarm(w), this.records.putVm(rec)]);
      th.progress(100);
      return { warm_state_id: w.id, vmid: rec.vmid, memory_ms: saved.ms, size_bytes: w.size_bytes };
    } catch (err) {
      const st = await this.driver.status(ref);
      if (st.running && st.status !== 'running') await this.driver.cont(ref).catch(() => undefined);
      await fs.rm(w.dir, { recursive: true, force: true });
      if (snapped) await this.records.vms.put(vmKey(rec.vmid), rec);
      await this.records.journal.drop(key);
      throw err;
    }
  }

  /**
   * POST /vms/warm-states/{id}: a new VM on a linked clone of the warm state's
   * disk, resumed from its memory. It runs when this returns; its own
   * hostname, machine-id, seed and SSH host keys are set through the agent.
   */
  async restoreWarmState(id: string, a: { name: string; vmid?: number; seed_data?: string; skip_rekey?: boolean; labels?: Record<string, string>; autostart?: boolean }, ctx: NoteSink, o: OwnerOpts = {}) {
    await this.requirePrograms('qemu-system-x86_64', 'qemu-img', 'genisoimage');
    const nm = a.name;
    if (a.seed_data !== undefined && Buffer.byteLength(a.seed_data) > SEED_MAX) throw badRequest(`argument 'seed_data' must be at most ${SEED_MAX} bytes`);
    // Restores of one warm state run side by side (sandboxes start many); a use count, registered
    // under the warm state's lock, keeps a delete from removing its files meanwhile.
    const w = await this.lock.run([`ws:${id}`], async () => {
      const found = await this.warmState(id, o);
      const refused = warmRefusal(found);
      if (refused) throw conflict(refused);
      this.warmUsers.set(id, (this.warmUsers.get(id) ?? 0) + 1);
      return found;
    }, 'warm-state restore');
    const unuse = () => {
      const n = (this.warmUsers.get(id) ?? 1) - 1;
      if (n <= 0) this.warmUsers.delete(id);
      else this.warmUsers.set(id, n);
    };
    let vmid: number;
    try {
      vmid = await this.allocVmid(a.vmid);
    } catch (err) {
      unuse();
      throw err;
    }
    let release: (() => void) | null = null;
    try {
      release = this.lock.hold([`vm:${vmid}`], 'warm-state restore');
      const pool = this.pool(w.storage_id);
      const t = now();
      const rec: VmRecord = {
        vmid, name: nm, owner: o.owner ?? null, labels: a.labels ?? {}, storage_id: pool.id, dir: vmDir(pool, vmid), image_id: w.image_id,
        linked_clone: true, base_image_id: w.base_image_id, base_warm_state_id: w.id, cpu_cores: w.cpu_cores, memory_mb: w.memory_mb,
        disk_size_gb: w.disk_size_gb, autostart: a.autostart ?? false, state: 'stopped', root_layers: ['root.qcow2'], disks: [],
        cloud_init: { ...w.cloud_init, password_set: false, generation: w.cloud_init.generation + 1 }, mac: this.driver.macFor(vmid, Date.now() % 9973),
        uuid: newUuid(), ssh_port: null, identity: { method: 'agent', pending: false, skip_rekey: a.skip_rekey ?? false, seed_written: false }, seed_generation: null,
        // Its own generation ID: QEMU writes it into the resumed memory, and the guest kernel reseeds.
        resume_file: null, vmgenid: newUuid(), task_id: null, created_at: t, updated_at: t,
      };
      const key = VmRecords.intentKey(`warm-restore-${vmid}`);
      await this.records.journal.begin(key, { op: 'warm-restore', vmid, id, dir: rec.dir });
      const t0 = Date.now();
      try {
        await fs.mkdir(rec.dir, { recursive: true, mode: 0o700 });
        await this.driver.createDisk(path.join(rec.dir, 'root.qcow2'), null, w.disk_file);
        await this.writeSeed(rec);
        await this.step('restore:disk');
        await this.launch(rec, w.memory_file);
        await this.step('restore:started');
      } catch (err) {
        await this.undoCreate(rec);
        await this.records.journal.drop(key);
        throw err;
      }
      const resumeMs = Date.now() - t0;
      await this.records.journal.commit(key, [this.records.putVm(rec)]);
      const identity = await this.agentIdentity(rec, a.seed_data ?? null, !(a.skip_rekey ?? false));
      if (identity.applied) {
        rec.identity.seed_written = a.seed_data !== undefined;
        await this.save(rec);
      }
      ctx.note({ summary: `VM ${vmid} '${nm}' created from warm state ${id} (resumed in ${resumeMs} ms)`, target: `vms/${vmid}`, metadata: { vmid, warm_state_id: id, resume_ms: resumeMs, identity: identity.applied } });
      return { vm: this.view(rec, 'running'), resume_ms: resumeMs, identity };
    } finally {
      this.reserved.delete(vmid);
      release?.();
      unuse();
    }
  }

  /** Hostname, machine-id, clock, seed and (in the background) SSH host keys of a resumed clone, through the agent. */
  private async agentIdentity(rec: VmRecord, seed: string | null, rekey: boolean): Promise<{ applied: boolean; reason: string | null }> {
    const ref = this.ref(rec.vmid);
    const end = Date.now() + 15_000;
    while (!(await this.driver.ping(ref, 1000))) {
      if (Date.now() > end) return { applied: false, reason: 'the guest agent did not answer within 15 s after the resume' };
      await sleep(100);
    }
    try {
      await this.driver.agent(ref, 'guest-set-time', { time: Date.now() * 1_000_000 }, 5000).catch(() => undefined);
      // One shell in the guest for all of it: each agent round trip costs a guest context switch under TCG.
      const q = (v: string) => `'${v.replace(/'/g, `'\\''`)}'`;
      const host = hostnameOf(rec.name, rec.vmid);
      const steps = ['set -e', `hostname ${q(host)}`, `printf '%s\\n' ${q(host)} > /etc/hostname`];
      if (rekey) steps.push(`printf '%s\\n' ${randomHex(16)} > /etc/machine-id`);
      // The seed arrives on stdin, never in an argument list.
      if (seed !== null) steps.push('mkdir -p /etc/svc', '(umask 077; cat > /etc/svc/seed)', 'chmod 600 /etc/svc/seed');
      // New SSH host keys take seconds of guest CPU: in the background, sshd restarted after.
      if (rekey) steps.push(`setsid sh -c 'rm -f /etc/ssh/ssh_host_*_key /etc/ssh/ssh_host_*_key.pub; ssh-keygen -A; systemctl try-restart ssh' >/dev/null 2>&1 </dev/null &`);
      const r = await this.driver.exec(ref, steps.join('\n'), 20_000, { input: seed ?? undefined, cut: false });
      if (r.exit_code !== 0) return { applied: false, reason: `setting the identity failed in the guest: ${(r.stderr.trim() || `exit ${r.exit_code}`).slice(0, 200)}` };
      return { applied: true, reason: null };
    } catch (err) {
      return { applied: false, reason: agentFailure(rec.vmid, err).message };
    }
  }

  async deleteWarmState(id: string, ctx: NoteSink, o: OwnerOpts = {}) {
    return this.lock.exclusiveOn(() => this.warmState(id, o), [`ws:${id}`], 'warm-state delete', async (w) => {
      const deps = (await this.records.allVms()).filter((v) => v.base_warm_state_id === id);
      if (deps.length) throw conflict(`warm state '${id}' is the base of VMs ${deps.map((v) => v.vmid).join(', ')}: delete them first`);
      if (this.warmUsers.get(id)) throw conflict(`warm state '${id}' is busy: warm-state restore in progress`);
      const key = VmRecords.intentKey(`warm-delete-${id}`);
      await this.records.journal.begin(key, { op: 'warm-delete', id, dir: w.dir });
      await fs.rm(w.dir, { recursive: true, force: true });
      await this.records.journal.commit(key, [this.records.delWarm(id)]);
      ctx.note({ summary: `Warm state ${id} '${w.name}' deleted`, target: `vms/warm-states/${id}`, metadata: { warm_state_id: id, vmid: w.vmid } });
      return { deleted: this.warmView(w, []) };
    });
  }

  // ------------------------------------------------------------ templates (capture)

  /** Everything that rests on an image: linked clones and warm states (all owners). */
  async imageDependents(imageId: string): Promise<{ vms: number[]; warm_states: string[] }> {
    const vms = (await this.records.allVms()).filter((v) => v.base_image_id === imageId).map((v) => v.vmid);
    const warm = (await this.records.allWarm()).filter((w) => w.base_image_id === imageId).map((w) => w.id);
    return { vms, warm_states: warm };
  }

  // ------------------------------------------------------------ docs

  async docsGet(vmid: number, o: OwnerOpts = {}) {
    await this.vm(vmid, o);
    const d = (await this.records.docs.get(vmKey(vmid))) ?? null;
    return { vmid, content: d?.content ?? '', updated_at: d?.updated_at ?? null };
  }

  async docsSet(vmid: number, content: string, append: boolean, ctx: NoteSink, o: OwnerOpts = {}) {
    return this.lock.run([`docs:${vmid}`], async () => {
      const rec = await this.vm(vmid, o);
      const t = now();
      const next = nextDocs((await this.records.docs.get(vmKey(vmid)))?.content ?? '', content, append, t);
      await this.records.docs.put(vmKey(vmid), { content: next, updated_at: t });
      ctx.note({ summary: `Documentation of VM ${vmid} '${rec.name}' ${append ? 'appended to' : 'replaced'}`, target: `vms/${vmid}/docs`, metadata: { vmid, append, bytes: Buffer.byteLength(content) } });
      return { vmid, content: next, updated_at: t };
    });
  }

  // ------------------------------------------------------------ host

  async hostStatus() {
    const h = await this.driver.host({ fresh: true });
    const programs = h.programs;
    const qemu = programs.find((p) => p.name === 'qemu-system-x86_64');
    const missingList = [...programs, h.fuse].filter((p) => !p.available).map((p) => ({ name: p.name, reason: p.reason }));
    return {
      available: Boolean(qemu?.available) && programs.find((p) => p.name === 'qemu-img')?.available === true,
      accelerator: h.accel.accel,
      accelerator_reason: h.accel.reason,
      kvm: { available: h.accel.accel === 'kvm', reason: h.accel.reason },
      qemu_version: qemu?.version ?? null,
      programs: [...programs, h.fuse],
      missing: missingList,
      refused: await this.refusedResources(),
    };
  }

  /**
   * Resources of /vms that a rule added since they were made refuses (docs/security.md,
   * "Resources made before the rules"): nothing is deleted, the call is refused with
   * the same message, and they are listed here until changed. Owned VMs and warm
   * states (sandboxes) are their owner's to report.
   */
  async refusedResources(): Promise<Array<{ kind: 'vm' | 'warm_state'; id: string; rule: string; refuses: string; message: string }>> {
    const out: Array<{ kind: 'vm' | 'warm_state'; id: string; rule: string; refuses: string; message: string }> = [];
    for (const w of await this.records.allWarm()) {
      if (w.owner !== null) continue;
      const why = warmRefusal(w);
      if (why) out.push({ kind: 'warm_state', id: w.id, rule: 'vmgenid', refuses: 'restore', message: why });
    }
    for (const v of await this.records.allVms()) {
      if (v.owner !== null) continue;
      const ci = v.cloud_init;
      const bridge = ci.network_type === 'bridged' ? ci.network_bridge ?? this.e.settings.bridge : null;
      const bridgeWhy = bridge ? this.bridgeRefusal(bridge) : null;
      if (bridgeWhy) out.push({ kind: 'vm', id: String(v.vmid), rule: 'vms.allowed_bridges', refuses: 'start', message: `VM ${v.vmid}: ${bridgeWhy}` });
      if ((v.vmgenid ?? null) === null && v.state !== 'creating') {
        const state = await this.state(v);
        if (state !== 'stopped') {
          out.push({
            kind: 'vm', id: String(v.vmid), rule: 'vmgenid', refuses: 'warm-state save',
            message: `VM ${v.vmid} is ${state} on a machine without a VM generation ID device (started before hostd added one): its warm states are refused until it is stopped and started again`,
          });
        }
      }
    }
    return out;
  }

  async capacity() {
    const [h, probe, vms] = await Promise.all([this.driver.resources(), this.driver.host(), this.records.allVms()]);
    let runCpu = 0;
    let runMem = 0;
    let running = 0;
    let allCpu = 0;
    let allMem = 0;
    for (const v of vms) {
      allCpu += v.cpu_cores;
      allMem += v.memory_mb;
      if ((await this.driver.status(this.ref(v.vmid))).running) {
        running++;
        runCpu += v.cpu_cores;
        runMem += v.memory_mb;
      }
    }
    const s = this.e.settings;
    // Under TCG each guest also holds its translation cache (about 1 GiB by default).
    const overhead = probe.accel.accel === 'kvm' ? 64 : s.tcgTbSizeMb ?? 1024;
    const need = s.defaultMemoryMb + overhead;
    const qemuOk = probe.programs.find((p) => p.name === 'qemu-system-x86_64')?.available === true;
    let reason: string | null = null;
    if (!qemuOk) reason = 'qemu-system-x86_64 is not installed';
    else if (h.memoryAvailableMb < need) reason = `the host has ${h.memoryAvailableMb} MiB of memory available; a ${s.defaultMemoryMb} MiB VM needs about ${need} MiB with QEMU's overhead`;
    return {
      can_run_another: reason === null,
      reason,
      accelerator: probe.accel.accel,
      next_vm: { cpu_cores: s.defaultCpuCores, memory_mb: s.defaultMemoryMb, memory_needed_mb: need },
      host: { cpu_cores: h.cpuCores, memory_mb: h.memoryTotalMb, memory_available_mb: h.memoryAvailableMb },
      running: { vms: running, cpu_cores: runCpu, memory_mb: runMem },
      allocated: { vms: vms.length, cpu_cores: allCpu, memory_mb: allMem },
      free: { cpu_cores: Math.max(0, h.cpuCores - runCpu), memory_mb: Math.max(0, h.memoryTotalMb - runMem) },
    };
  }

  /** A VM as the system and proxy domains see it. */
  async guestInfo(vmid: number): Promise<GuestInfo | null> {
    const rec = await this.records.vm(vmid);
    if (!rec) return null;
    const state = await this.state(rec);
    let addresses: string[] = [];
    if (rec.cloud_init.network_type === 'bridged') {
      if (rec.cloud_init.ip_address) addresses = [rec.cloud_init.ip_address.split('/')[0]];
      else if (state === 'running') {
        const c = this.addrCache.get(vmid);
        if (c && Date.now() - c.at < 30_000) addresses = c.addresses;
        else {
          try {
            addresses = (await this.driver.addresses(this.ref(vmid), 500)).map((x) => x.address);
            this.addrCache.set(vmid, { at: Date.now(), addresses });
          } catch {
            addresses = [];
          }
        }
      }
    }
    return {
      kind: rec.owner === 'sandbox' ? 'sandbox' : 'vm',
      id: String(vmid),
      name: rec.name,
      state,
      running: state === 'running' || state === 'paused',
      cpu_cores: rec.cpu_cores,
      memory_mb: rec.memory_mb,
      addresses,
    };
  }

  /** The guests port: VMs of /vms and template builds (owned VMs are reported by their owner). */
  async guests(): Promise<GuestInfo[]> {
    const out: GuestInfo[] = [];
    for (const v of await this.records.allVms()) {
      if (v.owner !== null && v.owner !== TEMPLATE_BUILD_OWNER) continue;
      const g = await this.guestInfo(v.vmid);
      if (g) out.push(g);
    }
    return out;
  }

  async listOwned(owner: string): Promise<VmView[]> {
    return this.list({ owner });
  }

  /** At start: autostart VMs after a host boot (the boot id changed since hostd last ran). */
  async autostart(bootIdFile?: string): Promise<number[]> {
    const id = await this.driver.bootId(bootIdFile);
    const last = (await this.records.meta.get('boot_id')) as string | undefined;
    await this.records.meta.put('boot_id', id);
    if (last === undefined || last === id) return [];
    const started: number[] = [];
    for (const v of await this.records.allVms()) {
      if (!v.autostart || v.state === 'creating') continue;
      try {
        if (v.state === 'suspended') await this.resume(v.vmid, { note() {} }, { owner: v.owner });
        else await this.start(v.vmid, { note() {} }, { owner: v.owner });
        started.push(v.vmid);
      } catch (err) {
        this.e.log.error({ err, vmid: v.vmid }, 'autostart failed');
      }
    }
    return started;
  }

  close(): void {
    this.closed = true;
  }

  static readonly TEMPLATE_BUILD_OWNER = TEMPLATE_BUILD_OWNER;
  static readonly SEED_NS = SEED_NS;
}

export type { JournalOp, VmIntent };
