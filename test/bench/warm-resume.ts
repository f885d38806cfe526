/**
 * The baseline of warm_resume_overhead_ratio: QEMU resuming a warm state by
 * hand, with hostd's work removed and nothing else changed.
 *
 * The arguments are the ones hostd itself gave the QEMU of a VM it restored
 * from the same warm state (read from /proc/<pid>/cmdline while it ran), with
 * only its own paths swapped: the root disk becomes a new linked clone of the
 * warm state's frozen layer (`disk.qcow2` beside `memory.state`, the layout of
 * daemon/vms/warm-states.ts), the run directory (QMP, agent socket, pidfile,
 * serial log) and the seed CD-ROM (a copy of hostd's, made before the clock
 * starts) move to a scratch directory, and the VM generation ID is a new one
 * (as hostd gives each restore). `-incoming "exec:cat <memory.state>"` reads
 * the same saved memory. The clock runs from `qemu-img create` of the clone
 * until the guest agent answers `guest-ping`, as hostd's runs from its POST
 * until wait-ready says the agent answers.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { run } from '../../daemon/lib/run.js';
import { GuestAgent } from '../../daemon/vms/qemu/agent.js';
import { QmpClient } from '../../daemon/vms/qemu/qmp.js';

/** What a resume by hand needs from hostd's command line of a restored VM. */
export interface CapturedResume {
  args: string[];
  runDir: string;
  rootFile: string;
  seedIso: string | null;
  /** A copy of hostd's seed ISO, made at capture: the VM's own is deleted with it. */
  seedCopy: string | null;
  memoryFile: string;
  frozenDisk: string;
}

/**
 * Reads the command line of the QEMU that hostd runs for `vm-<vmid>` under
 * data dir `root`, and copies its seed ISO into `keep` (the VM is deleted
 * before the resume by hand, its seed with it).
 */
export function captureResume(root: string, vmid: number, keep: string): CapturedResume {
  const runDir = path.join(root, 'data', 'run', `vm-${vmid}`);
  const pid = Number(fs.readFileSync(path.join(runDir, 'qemu.pid'), 'utf8').trim());
  const args = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').slice(1, -1);
  const after = (flag: string, pred: (v: string) => boolean) => args.find((v, i) => args[i - 1] === flag && pred(v));
  const root0 = after('-blockdev', (v) => v.includes('node-name=root,'));
  const rootFile = /file\.filename=((?:[^,]|,,)+)/.exec(root0 ?? '')?.[1]?.replace(/,,/g, ',');
  const incoming = after('-incoming', () => true);
  const memoryFile = incoming?.replace(/^exec:cat /, '');
  const seed = after('-drive', (v) => v.includes('id=seed'));
  const seedIso = /file=((?:[^,]|,,)+)/.exec(seed ?? '')?.[1]?.replace(/,,/g, ',') ?? null;
  if (!rootFile || !memoryFile || !incoming?.startsWith('exec:cat ')) throw new Error(`not a warm-state restore's command line: ${args.join(' ')}`);
  let seedCopy: string | null = null;
  if (seedIso) {
    seedCopy = path.join(keep, 'seed.iso');
    fs.copyFileSync(seedIso, seedCopy);
  }
  return { args, runDir, rootFile, seedIso, seedCopy, memoryFile, frozenDisk: path.join(path.dirname(memoryFile), 'disk.qcow2') };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    return !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/**
 * One resume by hand in `scratch` (made empty first); resolves with the time
 * to running (QMP `query-status`) and to the agent answering. Every QEMU it
 * started is killed before it returns, also on failure.
 */
export async function resumeByHand(c: CapturedResume, scratch: string, boundMs = 300_000): Promise<{ runningMs: number; agentMs: number }> {
  fs.rmSync(scratch, { recursive: true, force: true });
  const runDir = path.join(scratch, 'run');
  fs.mkdirSync(runDir, { recursive: true, mode: 0o700 });
  const clone = path.join(scratch, 'root.qcow2');
  const seed = c.seedIso ? path.join(scratch, 'seed.iso') : null;
  if (c.seedCopy && seed) fs.copyFileSync(c.seedCopy, seed);
  const swap = (v: string) => {
    let out = v.split(c.rootFile.replace(/,/g, ',,')).join(clone).split(c.runDir).join(runDir);
    if (c.seedIso && seed) out = out.split(c.seedIso.replace(/,/g, ',,')).join(seed);
    return out.replace(/^vmgenid,id=vmgenid0,guid=[0-9a-f-]+$/, `vmgenid,id=vmgenid0,guid=${crypto.randomUUID()}`);
  };
  const args = c.args.map(swap);
  const pidFile = path.join(runDir, 'qemu.pid');
  let pid = 0;
  let qmp: QmpClient | null = null;
  let agent: GuestAgent | null = null;
  try {
    const t0 = performance.now();
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-b', c.frozenDisk, clone]);
    await run('qemu-system-x86_64', args, { timeoutMs: 60_000 });
    pid = Number(fs.readFileSync(pidFile, 'utf8').trim());
    qmp = await QmpClient.connect(path.join(runDir, 'qmp.sock'), 5000);
    const end = Date.now() + boundMs;
    // As hostd's machines.start: wait until the state is loaded and the guest runs.
    for (;;) {
      const st = await qmp.execute<{ status: string }>('query-status');
      if (st.status === 'running') break;
      if (st.status === 'paused' || st.status === 'postmigrate') await qmp.execute('cont');
      else if (st.status !== 'inmigrate' && st.status !== 'prelaunch') throw new Error(`the resume by hand ended in state ${st.status}`);
      if (Date.now() > end) throw new Error(`the resume by hand did not run within ${boundMs} ms`);
      await sleep(10);
    }
    const runningMs = performance.now() - t0;
    for (;;) {
      try {
        agent ??= await GuestAgent.open(path.join(runDir, 'qga.sock'), 1000);
        await agent.call('guest-ping', undefined, 1000);
        break;
      } catch {
        agent?.close();
        agent = null;
        if (Date.now() > end) throw new Error(`the agent of the resume by hand did not answer within ${boundMs} ms`);
        await sleep(100);
      }
    }
    return { runningMs, agentMs: performance.now() - t0 };
  } finally {
    agent?.close();
    qmp?.close();
    if (!pid) {
      try {
        pid = Number(fs.readFileSync(pidFile, 'utf8').trim());
      } catch {
        /* never started */
      }
    }
    if (pid > 1 && alive(pid)) {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      // Only the QEMU this call started: its command line names the scratch run directory.
      if (cmd.includes(runDir)) process.kill(pid, 'SIGKILL');
      const end = Date.now() + 20_000;
      while (alive(pid) && Date.now() < end) await sleep(50);
    }
    fs.rmSync(scratch, { recursive: true, force: true });
  }
}
