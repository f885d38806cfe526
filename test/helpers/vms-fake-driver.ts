/**
 * An in-memory VM driver for unit tests of the service's rules (states, 409s,
 * minimums, clear rules, ownership). It never replaces the runtime tests
 * against QEMU: disks are empty files, machines are entries in a map.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import fsSync from 'node:fs';
import path from 'node:path';
import pino from 'pino';
import type { Store } from '../../daemon/store/store.js';
import type { TaskRunner } from '../../daemon/tasks/runner.js';
import { FileSecretStore } from '../../daemon/lib/secrets.js';
import { VmRecords, type ImageRecord } from '../../daemon/vms/records.js';
import { VmService } from '../../daemon/vms/service.js';
import { parseVmSettings } from '../../daemon/vms/settings.js';
import type { Availability } from '../../daemon/lib/availability.js';
import type {
  GuestAddress,
  HostProbe,
  HostResources,
  ImageInfo,
  MachineRef,
  MachineSpec,
  MachineStatus,
  SeedFiles,
  SeedInput,
  VmDriver,
} from '../../daemon/vms/driver.js';
// The seed's rendering is pure: the fake keeps the files QEMU's driver would write.
import { renderSeed } from '../../daemon/vms/qemu/seed.js';
import { hostResources } from '../../daemon/vms/qemu/host.js';

export class FakeDriver implements VmDriver {
  readonly machines = new Map<string, { spec: MachineSpec; status: string }>();
  readonly seeds = new Map<string, SeedFiles>();
  readonly identities: Array<{ disk: string; seed: string | null; rekey: boolean; hostname: string }> = [];
  readonly sizes = new Map<string, number>();
  /** Milliseconds a stop takes (to hold a VM's lock). */
  stopDelayMs = 0;

  async host(): Promise<HostProbe> {
    const ok = (name: string) => ({ name, version: '7.2.0', available: true, reason: null });
    return {
      accel: { accel: 'tcg', reason: 'fake' },
      programs: ['qemu-system-x86_64', 'qemu-img', 'qemu-storage-daemon', 'debugfs', 'genisoimage', 'openssl'].map(ok),
      fuse: ok('/dev/fuse'),
    };
  }

  async availability(): Promise<Availability[]> {
    const h = await this.host();
    return [...h.programs, h.fuse];
  }

  /** The real host's figures: the capacity rules are tested against what this machine has. */
  resources(): Promise<HostResources> {
    return hostResources();
  }

  bootId = async (): Promise<string> => 'fake-boot';

  macFor(vmid: number, salt: number): string {
    const n = (vmid * 7919 + salt * 104729) & 0xffffff;
    return ['52', '54', '00', (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff].map((x) => (typeof x === 'number' ? x.toString(16).padStart(2, '0') : x)).join(':');
  }

  readonly diskSlots = { first: 8, last: 0x1f };

  async start(spec: MachineSpec): Promise<{ pid: number }> {
    this.machines.set(spec.runDir, { spec, status: 'running' });
    return { pid: 4242 };
  }

  async status(m: MachineRef): Promise<MachineStatus> {
    const x = this.machines.get(m.runDir);
    return x ? { running: true, pid: 4242, status: x.status } : { running: false };
  }

  /** The grace period of every stop asked for (an ACPI power-down), in order. */
  readonly stopGraces: number[] = [];

  async stop(m: MachineRef, graceMs: number): Promise<'acpi' | 'forced' | 'not-running'> {
    this.stopGraces.push(graceMs);
    if (!this.machines.has(m.runDir)) return 'not-running';
    await new Promise((r) => setTimeout(r, this.stopDelayMs));
    this.machines.delete(m.runDir);
    return 'acpi';
  }

  async kill(m: MachineRef): Promise<void> {
    this.machines.delete(m.runDir);
  }

  async saveMemory(m: MachineRef, file: string): Promise<{ ms: number; bytes: number }> {
    this.trail.push('saveMemory');
    await fs.writeFile(file, 'memory');
    this.machines.get(m.runDir)!.status = 'postmigrate';
    return { ms: 1, bytes: 6 };
  }

  async snapshotRoot(m: MachineRef, newTop: string): Promise<string> {
    const x = this.machines.get(m.runDir)!;
    const old = x.spec.rootFile;
    await fs.writeFile(newTop, '');
    x.spec = { ...x.spec, rootFile: newTop };
    return old;
  }

  async activeRoot(m: MachineRef): Promise<{ node: string; file: string }> {
    return { node: 'root', file: this.machines.get(m.runDir)!.spec.rootFile };
  }

  async cont(m: MachineRef): Promise<void> {
    this.machines.get(m.runDir)!.status = 'running';
  }

  async generationId(m: MachineRef): Promise<string | null> {
    return this.machines.get(m.runDir)?.spec.generationId ?? null;
  }

  async attachDisk(): Promise<void> {}
  async detachDisk(): Promise<void> {}
  async growDisk(_m: MachineRef, _id: string, size: number): Promise<void> {
    void size;
  }

  async ping(m: MachineRef): Promise<boolean> {
    return this.machines.get(m.runDir)?.status === 'running';
  }

  async agent<T>(): Promise<T> {
    return {} as T;
  }

  /** Commands that reached exec, in order (`exec:<command>`), with what a test notes between them. */
  readonly trail: string[] = [];
  private held: Promise<void> | null = null;

  /** Holds the next exec (a warm restore's identity step) until the returned function is called. */
  holdNextExec(): () => void {
    let release!: () => void;
    this.held = new Promise<void>((r) => (release = r));
    return release;
  }

  /** Commands matching this time out in the guest (as a first boot that never settles). */
  execTimesOut: RegExp | null = null;

  async exec(_m: MachineRef, command: string) {
    this.trail.push(`exec:${command}`);
    const held = this.held;
    this.held = null;
    if (held) await held;
    if (this.execTimesOut?.test(command)) return { exit_code: null, stdout: '', stderr: '', timed_out: true, truncated: false, duration_ms: 1 };
    return { exit_code: 0, stdout: command, stderr: '', timed_out: false, truncated: false, duration_ms: 1 };
  }

  async addresses(): Promise<GuestAddress[]> {
    return [{ iface: 'eth0', address: '10.0.2.15', prefix: 24, family: 'ipv4' }];
  }

  async writeGuestFile(): Promise<void> {}

  async imageInfo(file: string): Promise<ImageInfo> {
    return { format: 'qcow2', virtualSize: this.sizes.get(file) ?? 2 * 1024 ** 3, actualSize: 0, backingFile: null, corrupt: false };
  }

  async backingChain(file: string): Promise<ImageInfo[]> {
    return [await this.imageInfo(file)];
  }

  async createDisk(file: string, size: number | null): Promise<void> {
    await fs.mkdir(path.dirname(file), { recursive: true });
    await fs.writeFile(file, '');
    if (size !== null) this.sizes.set(file, size);
  }

  async resizeDisk(file: string, size: number): Promise<void> {
    this.sizes.set(file, size);
  }

  async copyDisk(src: string, dst: string): Promise<void> {
    await fs.mkdir(path.dirname(dst), { recursive: true });
    await fs.copyFile(src, dst);
  }

  async writeIdentity(disk: string, _dir: string, plan: { seed: string | null; rekey: boolean; hostname: string }) {
    this.identities.push({ disk, ...plan });
    return { rootOffset: 1048576 };
  }

  async writeSeed(file: string, seed: SeedInput): Promise<void> {
    const files = renderSeed(seed);
    if (seed.userData !== undefined) files['user-data'] = seed.userData;
    this.seeds.set(file, files);
    await fs.writeFile(file, JSON.stringify(files));
  }

  async hashPassword(pw: string): Promise<string> {
    return `$6$fake$${crypto.createHash('sha256').update(pw).digest('hex')}`;
  }
}

/** A VM service over this driver in `dir` (pool `p`), with the image `base` of the given minimums imported. */
export async function fakeVmService(
  dir: string,
  store: Store,
  tasks: TaskRunner,
  drv: FakeDriver,
  mins: Pick<ImageRecord, 'min_cpu_cores' | 'min_memory_mb' | 'min_disk_gb'>,
  settings: Record<string, unknown> = {},
): Promise<VmService> {
  fsSync.mkdirSync(path.join(dir, 'pool'), { recursive: true });
  const pools = [{ id: 'p', path: path.join(dir, 'pool') }];
  const svc = new VmService({
    records: new VmRecords(store),
    driver: drv,
    tasks,
    secrets: new FileSecretStore(dir),
    settings: parseVmSettings({ default_memory_mb: 768, ...settings }, pools),
    pools,
    dataDir: dir,
    runBase: path.join(dir, 'run'),
    log: pino({ level: 'silent' }),
    env: {},
  });
  const file = path.join(dir, 'pool/.vms/images/base.qcow2');
  fsSync.mkdirSync(path.dirname(file), { recursive: true });
  fsSync.writeFileSync(file, '');
  const img: ImageRecord = {
    image_id: 'base',
    storage_id: 'p',
    name: 'base',
    kind: 'image',
    file,
    size_bytes: 0,
    virtual_size_bytes: 3 * 1024 ** 3,
    ...mins,
    default_user: 'debian',
    labels: {},
    source: { type: 'import', file },
    created_at: '',
  };
  await svc.records.images.put('base', img);
  return svc;
}
