/**
 * The VM domain's context: what every part of the VM service shares (the
 * environment, the lock and its labels, the reservations of ids and images
 * in use) and the steps several operations take (look a VM up as its caller
 * may see it, its state and view, allocate a vmid, prepare and launch a
 * machine, write its identity and seed, undo a create). The parts (create,
 * lifecycle, cloud-init, guest, disks, warm states, inventory, host status)
 * each hold one resource's or concern's operations and reach the rest only
 * through this context; service.ts composes them.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { PoolConfig } from '../config.js';
import { ApiError, badRequest, conflict, forbidden, internal, notFound, unavailable } from '../lib/errors.js';
import { KeyedLock, lockLabels } from '../lib/lock.js';
import type { PauseHook } from '../lib/test-pause.js';
import type { Tasks } from '../lib/tasks.js';
import type { SecretStore } from '../lib/secrets.js';
import { ensureAvailable } from '../lib/availability.js';
import { AgentError, AgentTimeout, NoExtRoot, type MachineRef, type MachineSpec, type NetSpec, type VmDriver, type GuestFileDriver } from './driver.js';
import {
  type VmRecords,
  vmKey,
  WARM_FORMAT,
  type VmState,
  type ImageRecord,
  type NetworkType,
  type StoredCloudInit,
  type VmRecord,
  type WarmStateRecord,
} from './records.js';
import type { VmSettings } from './settings.js';
import { validBridgeName } from './settings.js';
import type { EventsPort } from '../domain.js';
import { VmStates } from './state-events.js';
import { freeLoopbackPort, hostnameOf, newUuid, now, poolOf, WARM_ID } from './common.js';

export interface VmEnv {
  records: VmRecords;
  driver: VmDriver;
  /** Guest files through the agent; absent with a driver made for tests of service rules. */
  files?: GuestFileDriver;
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
  /** Where `vms.state` events go (state-events.ts); none in tests that build the service by hand. */
  events?: EventsPort;
  /** Hears each resume from a warm state once it is stored, with its milliseconds (the `warmResumes` port, index.ts). */
  onWarmResume?(ms: number): void;
}

export type { VmState } from './records.js';

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

export const SEED_NS = 'vms-cloudinit';
export const SEED_MAX = 64 * 1024;
export const TEMPLATE_BUILD_OWNER = 'template-build';

/** How the domain's lock keys read in a 409 (`VM 101 is busy: clone to VM 102 in progress`). */
export const VM_LOCK_LABELS = lockLabels({
  vm: (id) => `VM ${id}`,
  image: (id) => `image '${id}'`,
  ws: (id) => `warm state '${id}'`,
  iso: (id) => `ISO '${id}'`,
});

/** A disk chain the driver refused to open (qemu/img.ts DiskChainEscape). */
export const isChainEscape = (err: unknown): boolean => (err as Error)?.name === 'DiskChainEscape';

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

export class VmContext {
  readonly lock = new KeyedLock(VM_LOCK_LABELS);

  /** vmids being created (not yet in the store). */
  readonly reserved = new Set<number>();

  /** Image ids a create in progress is cloning from (move/delete wait for them). */
  readonly imageUsers = new Map<string, number>();

  /** Warm states restores are resuming from (several at once; a delete waits for none). */
  readonly warmUsers = new Map<string, number>();

  readonly addrCache = new Map<number, { at: number; addresses: string[] }>();

  /**
   * VMs resumed from a warm state whose own identity the restore is still
   * setting through the agent (warm-states.ts): the VM runs and its agent may
   * answer, but it still has the saved guest's hostname, machine-id and keys.
   * wait-ready, exec and guest files wait for the entry to go.
   */
  private readonly identitySteps = new Map<number, Promise<void>>();

  closed = false;

  /** Reports each change of a VM's state once (`vms.state` events, and the owning domain of an owned VM). */
  readonly states: VmStates;

  constructor(readonly e: VmEnv) {
    this.states = new VmStates(this, e.events);
  }

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
        bridge: rec.cloud_init.network_type === 'bridged' ? (rec.cloud_init.network_bridge ?? this.e.settings.bridge) : null,
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

  async save(rec: VmRecord): Promise<void> {
    rec.updated_at = now();
    await this.records.vms.put(vmKey(rec.vmid), rec);
  }

  /**
   * Reserves a vmid until its record is written. Allocations run one at a
   * time, and the reservations are copied before the records are read: a
   * create that commits its record (and drops its reservation) while this one
   * reads would otherwise be in neither, and its vmid handed out twice.
   */
  allocVmid(wanted: number | undefined): Promise<number> {
    return this.lock.run(['vmid-alloc'], () => this.allocVmidNow(wanted));
  }

  async allocVmidNow(wanted: number | undefined): Promise<number> {
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

  /** Every image and template on this host (the port the sandboxes domain lists images through). */
  allImages(): Promise<ImageRecord[]> {
    return this.records.allImages();
  }

  /** The image by id, 404 naming it (and hinting at the catalog when it is downloadable). */
  async image(id: string, catalogHint?: (id: string) => boolean): Promise<ImageRecord> {
    const img = await this.records.image(id);
    if (img) return img;
    if (catalogHint?.(id)) {
      throw notFound(
        `image '${id}' is in the download catalog but not on this host; download it first (POST /templates with base_image_id '${id}', or hostctl vm image fetch ${id})`,
      );
    }
    throw notFound(`image '${id}' not found`);
  }

  useImage(id: string): () => void {
    this.imageUsers.set(id, (this.imageUsers.get(id) ?? 0) + 1);
    return () => {
      const n = (this.imageUsers.get(id) ?? 1) - 1;
      if (n <= 0) this.imageUsers.delete(id);
      else this.imageUsers.set(id, n);
    };
  }

  async hostLimits(cpu: number, mem: number): Promise<void> {
    if (cpu > 255) throw badRequest("argument 'cpu_cores' must be at most 255");
    const h = await this.driver.resources();
    if (mem > h.memoryTotalMb) throw badRequest(`argument 'memory_mb' (${mem}) is more than the host's ${h.memoryTotalMb} MiB`);
  }

  /** Before a cold start: the pending identity, and the seed ISO when the settings changed since it was built. */
  async prepare(rec: VmRecord): Promise<void> {
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
  async writeIdentity(rec: VmRecord, plan: { seed: string | null; rekey: boolean }): Promise<void> {
    await this.requirePrograms('qemu-storage-daemon', 'debugfs', '/dev/fuse');
    try {
      await this.driver.writeIdentity(path.join(rec.dir, rec.root_layers[rec.root_layers.length - 1]), rec.dir, {
        seed: plan.seed,
        hostname: hostnameOf(rec.name, rec.vmid),
        rekey: plan.rekey,
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

  async undoCreate(rec: VmRecord): Promise<void> {
    await this.driver.kill(this.ref(rec.vmid)).catch(() => undefined);
    await fs.rm(rec.dir, { recursive: true, force: true });
    await fs.rm(this.runDir(rec.vmid), { recursive: true, force: true });
    await this.e.secrets.delete(SEED_NS, `seed-${rec.vmid}`).catch(() => undefined);
    await this.e.secrets.delete(SEED_NS, `password-${rec.vmid}`).catch(() => undefined);
  }

  // ------------------------------------------------------------ lifecycle

  async machineSpec(rec: VmRecord, incoming?: string): Promise<MachineSpec> {
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
  async ifupScript(bridge: string): Promise<string> {
    if (!validBridgeName(bridge)) throw badRequest(`bridge name '${bridge}' is not valid`);
    const dir = path.join(this.e.dataDir, 'vms');
    await fs.mkdir(dir, { recursive: true });
    const file = path.join(dir, `ifup-${bridge}`);
    await fs.writeFile(file, `#!/bin/sh\nset -e\nip link set "$1" master '${bridge}'\nip link set "$1" up\n`, { mode: 0o700 });
    return file;
  }

  async launch(rec: VmRecord, incoming?: string): Promise<void> {
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

  /** After a resume the guest clock is as old as the save: set it from the host (best effort). */
  async syncClock(vmid: number): Promise<void> {
    try {
      await this.driver.agent(this.ref(vmid), 'guest-set-time', { time: Date.now() * 1_000_000 }, 5000);
    } catch {
      /* no agent (yet): the guest's NTP catches up */
    }
  }

  // ------------------------------------------------------------ guest

  /**
   * Marks `vmid`'s identity step under way until the returned function is
   * called, which also wakes the VM's waiters (wait-ready sleeps on the VM's
   * state reports).
   */
  identityStep(vmid: number): () => void {
    let done!: () => void;
    const p = new Promise<void>((r) => (done = r));
    this.identitySteps.set(vmid, p);
    return () => {
      if (this.identitySteps.get(vmid) === p) this.identitySteps.delete(vmid);
      done();
      this.states.wake(vmid);
    };
  }

  /** Whether a warm restore is still setting `vmid`'s identity. */
  settingIdentity(vmid: number): boolean {
    return this.identitySteps.has(vmid);
  }

  /** Resolves once no identity step runs for `vmid` (at once when none does): a user's call never runs before it. */
  async identitySet(vmid: number): Promise<void> {
    await this.identitySteps.get(vmid);
  }

  async requireRunning(rec: VmRecord, what: string): Promise<void> {
    const state = await this.state(rec);
    if (state !== 'running') throw conflict(`VM ${rec.vmid} is ${state}: ${what} needs a running VM`);
  }

  // ------------------------------------------------------------ warm states

  warmView(w: WarmStateRecord, dependents: number[]) {
    const refused = warmRefusal(w);
    return {
      id: w.id,
      name: w.name,
      vmid: w.vmid,
      image_id: w.image_id,
      storage_id: w.storage_id,
      cpu_cores: w.cpu_cores,
      memory_mb: w.memory_mb,
      disk_size_gb: w.disk_size_gb,
      network_type: w.network_type,
      size_bytes: w.size_bytes,
      dependents,
      owner: w.owner,
      created_at: w.created_at,
      generation_id: w.vmgenid ?? null,
      format: w.format ?? 1,
      resumable: refused === null,
      reason: refused,
    };
  }

  async warmState(id: string, o: OwnerOpts): Promise<WarmStateRecord> {
    const w = WARM_ID.test(id) ? await this.records.warmState(id) : undefined;
    if (!w || (w.owner ?? null) !== (o.owner ?? null)) throw notFound(`warm state '${id}' not found`);
    return w;
  }

  // ------------------------------------------------------------ templates (capture)

  /** Everything that rests on an image: linked clones and warm states (all owners). */
  async imageDependents(imageId: string): Promise<{ vms: number[]; warm_states: string[] }> {
    const vms = (await this.records.allVms()).filter((v) => v.base_image_id === imageId).map((v) => v.vmid);
    const warm = (await this.records.allWarm()).filter((w) => w.base_image_id === imageId).map((w) => w.id);
    return { vms, warm_states: warm };
  }

  close(): void {
    this.closed = true;
    this.states.close();
  }
}
