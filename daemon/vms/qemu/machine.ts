/**
 * One qemu-system-x86_64 process per running VM, started with -daemonize so
 * that it outlives hostd: a restarted hostd finds it again by its pidfile and
 * QMP socket (both in the VM's run directory). QMP connections are kept per
 * VM (for events); guest agent sessions too, one command at a time.
 */
import fs from 'node:fs/promises';
import { run } from '../../lib/run.js';
import { SerialQueue } from '../../lib/serial.js';
import type { ExecResult } from '../../lib/exec-output.js';
import { QmpClient, QmpError, type QmpEvent } from './qmp.js';
import { AgentTimeout, GuestAgent, type GuestInterface } from './agent.js';
import { guestExec, type GuestExecOptions } from './exec.js';
import { GuestFiles, SCRIPT_TIMEOUT_MS } from './files.js';
import { machineArgs, runFiles, shellSafePath, type DiskSpec, type MachineSpec } from './args.js';
import { machineUsage } from './usage.js';
import type { MachineEvent, MachineRef, MachineStatus, MachineUsage } from '../driver.js';

export type { MachineRef, MachineStatus };

export type { ExecResult };

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function pidOf(ref: MachineRef): Promise<number | null> {
  let text: string;
  try {
    text = await fs.readFile(runFiles(ref.runDir).pid, 'utf8');
  } catch {
    return null;
  }
  const pid = Number(text.trim());
  if (!Number.isInteger(pid) || pid <= 1) return null;
  // A recycled pid must not pass for our QEMU: its command line names this VM's QMP socket.
  try {
    const cmdline = await fs.readFile(`/proc/${pid}/cmdline`, 'utf8');
    if (!cmdline.includes(`process=hostd-${ref.name}`) || !cmdline.includes(runFiles(ref.runDir).qmp)) return null;
  } catch {
    return null;
  }
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    if (/\) Z /.test(stat)) return null;
  } catch {
    return null;
  }
  return pid;
}

async function alive(pid: number): Promise<boolean> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    return !/\) Z /.test(stat);
  } catch {
    return false;
  }
}

async function waitGone(pid: number, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (!(await alive(pid))) return true;
    await sleep(25);
  }
  return !(await alive(pid));
}

export class Machines {
  /** `confine`: walks a disk's backing chain and throws when it leaves the pools (img.ts confinedChain). */
  constructor(private readonly confine: (file: string) => Promise<unknown>) {}

  private readonly qmps = new Map<string, Promise<QmpClient>>();
  private readonly agents = new Map<string, GuestAgent>();
  private readonly agentQueues = new Map<string, SerialQueue>();

  /** The VM's QMP connection (kept open; reconnected when QEMU or hostd dropped it). */
  async qmp(ref: MachineRef): Promise<QmpClient> {
    const cached = this.qmps.get(ref.runDir);
    if (cached) {
      try {
        const c = await cached;
        if (!c.isClosed) return c;
      } catch {
        /* reconnect below */
      }
      this.qmps.delete(ref.runDir);
    }
    const p = QmpClient.connect(runFiles(ref.runDir).qmp, 5000);
    this.qmps.set(ref.runDir, p);
    p.then(
      (c) => c.once('close', () => this.qmps.get(ref.runDir) === p && this.qmps.delete(ref.runDir)),
      () => this.qmps.delete(ref.runDir),
    );
    return p;
  }

  private forget(ref: MachineRef): void {
    const q = this.qmps.get(ref.runDir);
    this.qmps.delete(ref.runDir);
    void q?.then(
      (c) => c.close(),
      () => undefined,
    );
    this.agents.get(ref.runDir)?.close();
    this.agents.delete(ref.runDir);
  }

  /** Starts QEMU; with `spec.incoming`, waits until the saved state is loaded and the guest runs. */
  async start(spec: MachineSpec, timeoutMs = 120_000): Promise<{ pid: number }> {
    const ref = { name: spec.name, runDir: spec.runDir };
    this.forget(ref);
    const files = runFiles(spec.runDir);
    // QEMU follows a qcow2's backing file wherever it points: each chain is walked and confined first.
    for (const disk of [spec.rootFile, ...spec.disks.map((d) => d.file)]) await this.confine(disk);
    await fs.mkdir(spec.runDir, { recursive: true, mode: 0o700 });
    for (const f of [files.qmp, files.qga, files.pid]) await fs.rm(f, { force: true });
    await run('qemu-system-x86_64', machineArgs(spec), { install: 'the qemu-system-x86 package', timeoutMs: 60_000 });
    const pid = await pidOf(ref);
    if (!pid) throw new Error(`QEMU for ${spec.name} exited right after start; see ${files.serial}`);
    if (spec.incoming) {
      const qmp = await this.qmp(ref);
      const end = Date.now() + timeoutMs;
      for (;;) {
        const st = await qmp.execute<{ status: string }>('query-status');
        if (st.status === 'running') break;
        if (st.status !== 'inmigrate' && st.status !== 'prelaunch') {
          const mig = await qmp
            .execute<{ status?: string; 'error-desc'?: string }>('query-migrate')
            .catch(() => ({}) as { status?: string; 'error-desc'?: string });
          if (mig.status === 'failed') {
            await this.kill(ref);
            throw new Error(`loading the saved state failed: ${mig['error-desc'] ?? 'unknown error'}`);
          }
          if (st.status === 'paused') {
            await qmp.execute('cont');
            continue;
          }
        }
        if (Date.now() > end) {
          await this.kill(ref);
          throw new Error(`the saved state did not load within ${timeoutMs} ms`);
        }
        await sleep(10);
      }
    }
    return { pid };
  }

  async status(ref: MachineRef): Promise<MachineStatus> {
    const pid = await pidOf(ref);
    if (!pid) {
      this.forget(ref);
      return { running: false };
    }
    try {
      const qmp = await this.qmp(ref);
      const st = await qmp.execute<{ status: string }>('query-status', undefined, 3000);
      return { running: true, pid, status: st.status };
    } catch {
      if (!(await alive(pid))) return { running: false };
      return { running: true, pid, status: 'unknown' };
    }
  }

  /**
   * ACPI power-down; after `graceMs` without the process ending, a hard stop.
   * A paused guest cannot handle ACPI, so it is stopped hard at once.
   */
  async stop(ref: MachineRef, graceMs: number): Promise<'acpi' | 'forced' | 'not-running'> {
    const st = await this.status(ref);
    if (!st.running) return 'not-running';
    if (st.status === 'running') {
      try {
        const qmp = await this.qmp(ref);
        await qmp.execute('system_powerdown');
        if (await waitGone(st.pid, graceMs)) {
          this.forget(ref);
          return 'acpi';
        }
      } catch {
        /* hard stop below */
      }
    }
    await this.kill(ref);
    return 'forced';
  }

  /** Ends the process now (QMP quit, then SIGKILL). */
  async kill(ref: MachineRef): Promise<void> {
    const pid = await pidOf(ref);
    if (!pid) return;
    try {
      const qmp = await this.qmp(ref);
      await qmp.execute('quit', undefined, 3000).catch(() => undefined);
      if (await waitGone(pid, 5000)) {
        this.forget(ref);
        return;
      }
    } catch {
      /* SIGKILL below */
    }
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    await waitGone(pid, 10_000);
    this.forget(ref);
  }

  /**
   * Follows the machine on its kept QMP connection (the one commands use:
   * QEMU takes one monitor client per socket) and reattaches when that
   * connection is replaced; once the process is gone, reports `exit` with
   * the reason of the last SHUTDOWN event seen, or `crashed` without one.
   */
  watch(ref: MachineRef, fn: (e: MachineEvent) => void): () => void {
    let stopped = false;
    let wake: (() => void) | null = null;
    let shutdown: Record<string, unknown> | null = null;
    const onEvent = (e: QmpEvent) => {
      if (e.event !== 'SHUTDOWN' && e.event !== 'STOP' && e.event !== 'RESUME') return;
      if (e.event === 'SHUTDOWN') shutdown = e.data ?? {};
      if (!stopped) fn({ type: 'qmp', event: e.event, data: e.data ?? {} });
    };
    void (async () => {
      let delay = 25;
      while (!stopped) {
        if (!(await pidOf(ref))) {
          if (stopped) return;
          stopped = true;
          const why = shutdown as Record<string, unknown> | null;
          fn({ type: 'exit', reason: why ? (why.guest === true ? 'guest-shutdown' : String(why.reason ?? 'host')) : 'crashed' });
          return;
        }
        let client: QmpClient;
        try {
          client = await this.qmp(ref);
          delay = 25;
        } catch {
          // QEMU is still exiting (its socket closed first), or busy starting: look again shortly.
          await sleep(delay);
          delay = Math.min(delay * 2, 1000);
          continue;
        }
        client.on('event', onEvent);
        await new Promise<void>((resolve) => {
          wake = resolve;
          if (client.isClosed || stopped) resolve();
          else client.once('close', () => resolve());
        });
        wake = null;
        client.off('event', onEvent);
      }
    })();
    return () => {
      stopped = true;
      wake?.();
    };
  }

  /**
   * Saves guest memory and device state into `file` (migration to a file).
   * The guest ends paused in `postmigrate`; the caller quits it (suspend) or
   * snapshots the disk and continues it (warm state). On failure the guest
   * keeps running.
   */
  async saveMemory(ref: MachineRef, file: string, timeoutMs = 600_000): Promise<{ ms: number; bytes: number }> {
    const qmp = await this.qmp(ref);
    const t0 = Date.now();
    await qmp.execute('migrate-set-parameters', { 'max-bandwidth': 64 * 1024 ** 3, 'downtime-limit': 2000 });
    await qmp.execute('migrate', { uri: `exec:cat > ${shellSafePath(file)}` });
    for (;;) {
      const m = await qmp.execute<{ status?: string; 'error-desc'?: string; ram?: { transferred?: number } }>('query-migrate');
      if (m.status === 'completed') break;
      if (m.status === 'failed' || m.status === 'cancelled') {
        const st = await qmp.execute<{ status: string }>('query-status').catch(() => ({ status: '' }));
        if (st.status !== 'running') await qmp.execute('cont').catch(() => undefined);
        throw new Error(`saving guest memory failed: ${m['error-desc'] ?? m.status}`);
      }
      if (Date.now() - t0 > timeoutMs) {
        await qmp.execute('migrate_cancel').catch(() => undefined);
        throw new Error(`saving guest memory did not finish within ${timeoutMs} ms`);
      }
      await sleep(10);
    }
    const st = await fs.stat(file);
    return { ms: Date.now() - t0, bytes: st.size };
  }

  /** The file of the root disk's active layer, as QEMU has it open. */
  async activeRoot(ref: MachineRef): Promise<{ node: string; file: string }> {
    const qmp = await this.qmp(ref);
    const blocks = await qmp.execute<Array<{ qdev?: string; inserted?: { 'node-name': string; file: string } }>>('query-block');
    const root = blocks.find((b) => b.qdev?.includes('dev-root'));
    if (!root?.inserted) throw new Error('QEMU shows no root disk');
    return { node: root.inserted['node-name'], file: root.inserted.file };
  }

  /**
   * Makes `newTop` the root disk's active layer (a qcow2 overlay created by
   * QEMU); the old layer, returned, is read-only from this instant on.
   */
  async snapshotRoot(ref: MachineRef, newTop: string, nodeName: string): Promise<string> {
    const qmp = await this.qmp(ref);
    const cur = await this.activeRoot(ref);
    await qmp.execute(
      'blockdev-snapshot-sync',
      { 'node-name': cur.node, 'snapshot-file': newTop, 'snapshot-node-name': nodeName, format: 'qcow2', mode: 'absolute-paths' },
      60_000,
    );
    return cur.file;
  }

  /** The guid of the machine's vmgenid device as QEMU holds it; null when the machine has none. */
  async generationId(ref: MachineRef): Promise<string | null> {
    const qmp = await this.qmp(ref);
    try {
      return (await qmp.execute<{ guid: string }>('query-vm-generation-id')).guid;
    } catch (err) {
      if (err instanceof QmpError && /not found/i.test(err.message)) return null;
      throw err;
    }
  }

  async cont(ref: MachineRef): Promise<void> {
    const qmp = await this.qmp(ref);
    await qmp.execute('cont');
  }

  /** Quits a (paused) QEMU and waits for the process to end. */
  async quit(ref: MachineRef): Promise<void> {
    await this.kill(ref);
  }

  async attachDisk(ref: MachineRef, d: DiskSpec): Promise<void> {
    const qmp = await this.qmp(ref);
    await qmp.execute('blockdev-add', { driver: 'qcow2', 'node-name': `disk-${d.id}`, discard: 'unmap', file: { driver: 'file', filename: d.file } });
    try {
      await qmp.execute('device_add', {
        driver: 'virtio-blk-pci',
        drive: `disk-${d.id}`,
        id: `dev-disk-${d.id}`,
        bus: 'pci.0',
        addr: '0x' + d.slot.toString(16),
      });
    } catch (err) {
      await qmp.execute('blockdev-del', { 'node-name': `disk-${d.id}` }).catch(() => undefined);
      throw err;
    }
  }

  /** Unplugs a disk; the guest must acknowledge the ACPI eject within `timeoutMs`. */
  async detachDisk(ref: MachineRef, id: string, timeoutMs = 30_000): Promise<void> {
    const qmp = await this.qmp(ref);
    const devId = `dev-disk-${id}`;
    const blocks = await qmp.execute<Array<{ qdev?: string }>>('query-block');
    if (blocks.some((b) => b.qdev?.includes(devId))) {
      const gone = qmp.waitEvent('DEVICE_DELETED', timeoutMs, (e) => e.data?.device === devId);
      await qmp.execute('device_del', { id: devId });
      await gone;
    }
    const nodes = await qmp.execute<Array<{ 'node-name': string }>>('query-named-block-nodes', { flat: true });
    if (nodes.some((n) => n['node-name'] === `disk-${id}`)) await qmp.execute('blockdev-del', { 'node-name': `disk-${id}` });
  }

  /**
   * The machine's figures for the metrics (usage.ts), or null when it does
   * not run. A QEMU that does not answer fails the read within seconds (the
   * QMP timeouts); the scrape itself waits less (daemon/metrics/bounded-read.ts).
   */
  async usage(ref: MachineRef): Promise<MachineUsage | null> {
    const pid = await pidOf(ref);
    if (!pid) return null;
    return machineUsage(pid, await this.qmp(ref));
  }

  async growDisk(ref: MachineRef, id: string, sizeBytes: number): Promise<void> {
    const qmp = await this.qmp(ref);
    await qmp.execute('block_resize', { 'node-name': `disk-${id}`, size: sizeBytes }, 60_000);
  }

  private queue(ref: MachineRef): SerialQueue {
    let q = this.agentQueues.get(ref.runDir);
    if (!q) {
      q = new SerialQueue();
      this.agentQueues.set(ref.runDir, q);
    }
    return q;
  }

  /** The VM's agent connection, opened (and synchronised within `openTimeoutMs`) when there is none; `fresh` when this call opened it. */
  private async connection(ref: MachineRef, openTimeoutMs: number): Promise<{ a: GuestAgent; fresh: boolean }> {
    const a = this.agents.get(ref.runDir);
    if (a) return { a, fresh: false };
    const opened = await GuestAgent.open(runFiles(ref.runDir).qga, openTimeoutMs);
    this.agents.set(ref.runDir, opened);
    return { a: opened, fresh: true };
  }

  /** One guest agent command (AgentTimeout when the agent does not answer). */
  agent<T = any>(ref: MachineRef, command: string, args?: Record<string, unknown>, timeoutMs = 10_000): Promise<T> {
    return this.queue(ref).run(async () => {
      // A command's own time is not spent waiting for a connection.
      const { a } = await this.connection(ref, Math.min(timeoutMs, 3000));
      try {
        return await a.call<T>(command, args, timeoutMs);
      } catch (err) {
        if (err instanceof AgentTimeout || !(err instanceof Error) || err.name !== 'AgentError') {
          a.close();
          this.agents.delete(ref.runDir);
        }
        throw err;
      }
    });
  }

  /**
   * Whether the guest agent answers a ping within `timeoutMs`. On a new
   * connection the agent's answer to the synchronisation is the answer: no
   * second round trip (one less guest wake-up under TCG, e.g. right after a
   * warm resume). The whole `timeoutMs` may go to the synchronisation: a
   * guest that answers slowly (a starved TCG guest) still answers.
   */
  async ping(ref: MachineRef, timeoutMs = 2000): Promise<boolean> {
    try {
      const fresh = await this.queue(ref).run(async () => (await this.connection(ref, timeoutMs)).fresh);
      if (!fresh) await this.agent(ref, 'guest-ping', undefined, timeoutMs);
      return true;
    } catch {
      return false;
    }
  }

  /**
   * `/bin/sh -c command` in the guest, each stream cut at the shared cap in
   * the guest (exec.ts); the command's process group is killed at `timeoutMs`.
   */
  exec(ref: MachineRef, command: string, timeoutMs: number, opts: GuestExecOptions = {}): Promise<ExecResult> {
    return guestExec((c, a, t) => this.agent(ref, c, a, t), command, timeoutMs, opts);
  }

  /** Addresses the guest agent reports (loopback and link-local left out). */
  async addresses(ref: MachineRef, timeoutMs = 3000): Promise<Array<{ iface: string; address: string; prefix: number; family: 'ipv4' | 'ipv6' }>> {
    const ifs = await this.agent<GuestInterface[]>(ref, 'guest-network-get-interfaces', undefined, timeoutMs);
    const out: Array<{ iface: string; address: string; prefix: number; family: 'ipv4' | 'ipv6' }> = [];
    for (const i of ifs) {
      if (i.name === 'lo') continue;
      for (const a of i['ip-addresses'] ?? []) {
        const ip = a['ip-address'];
        if (ip.startsWith('127.') || ip.startsWith('169.254.') || ip.toLowerCase().startsWith('fe80:') || ip === '::1') continue;
        out.push({ iface: i.name, address: ip, prefix: a.prefix, family: a['ip-address-type'] });
      }
    }
    return out;
  }

  /** Guest files by path (files.ts): agent file commands and fixed scripts. */
  files(ref: MachineRef): GuestFiles {
    return new GuestFiles(
      (c, a, t) => this.agent(ref, c, a, t),
      (script, args) => this.exec(ref, script, SCRIPT_TIMEOUT_MS, { cut: false, args }),
    );
  }

  /** Writes a file in the guest through the agent. */
  async writeGuestFile(ref: MachineRef, file: string, content: string | Buffer, mode?: string): Promise<void> {
    const h = await this.agent<number>(ref, 'guest-file-open', { path: file, mode: 'w' });
    try {
      const buf = Buffer.isBuffer(content) ? content : Buffer.from(content, 'utf8');
      for (let off = 0; off < buf.length || off === 0; off += 48 * 1024) {
        await this.agent(ref, 'guest-file-write', { handle: h, 'buf-b64': buf.subarray(off, off + 48 * 1024).toString('base64') });
        if (buf.length === 0) break;
      }
    } finally {
      await this.agent(ref, 'guest-file-close', { handle: h }).catch(() => undefined);
    }
    if (mode) await this.exec(ref, 'chmod "$1" "$2"', 10_000, { cut: false, args: [mode, file] });
  }
}
