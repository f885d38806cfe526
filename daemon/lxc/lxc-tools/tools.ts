/**
 * The LXC tools (`lxc-start`, `lxc-stop`, `lxc-attach`, ...) for containers
 * whose configs live under one lxcpath. Every call names the lxcpath (-P), so
 * hostd's containers never mix with the host's /var/lib/lxc. State is read
 * from cgroup files when they answer (cgroups.ts) and from `lxc-info`
 * otherwise; errors carry the tail of the container's LXC log.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { run, runBounded, ProgramError } from '../../lib/run.js';
import { internal } from '../../lib/errors.js';
import type { ContainerTools, ExecResult, HostFacts, LxcState, RootfsPlacement } from '../driver.js';
import type { ContainerRecord } from '../model.js';
import { lxcNameOf } from '../naming.js';
import { type CgroupReader, parseFibTrieLocal, parseIfInet6, parseNetDev } from './cgroups.js';
import { CPU_PERIOD_US, renderConfig } from './config.js';
import { stagingEntry } from './mounts.js';

const INSTALL = 'the lxc package';

export function parseLxcInfo(text: string): { state: LxcState | null; pid: number | null; ips: string[] } {
  let state: LxcState | null = null;
  let pid: number | null = null;
  const ips: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^([A-Za-z ]+):\s+(.*)$/.exec(line.trim());
    if (!m) continue;
    if (m[1] === 'State') state = m[2].trim() as LxcState;
    else if (m[1] === 'PID') pid = Number(m[2]) || null;
    else if (m[1] === 'IP') ips.push(m[2].trim());
  }
  return { state, pid, ips };
}

export interface ToolsDeps {
  cgroups: CgroupReader;
  /** What the host has (the driver's cache): which cgroup keys LXC honours, AppArmor. */
  host: () => Promise<HostFacts>;
  /** The cgroup paths (relative to each hierarchy's root) a container's config names. */
  cgroupDirs: (lxcid: number) => { container: string; monitor: string };
  /** Removes a path, unmounting anything below it first. */
  remove: (p: string) => Promise<void>;
}

export class LxcTools implements ContainerTools {
  private readonly cgroups: CgroupReader;

  constructor(
    readonly lxcPath: string,
    private readonly d: ToolsDeps,
  ) {
    this.cgroups = d.cgroups;
  }

  confDir(name: string): string {
    return path.join(this.lxcPath, name);
  }
  configFile(name: string): string {
    return path.join(this.confDir(name), 'config');
  }
  logFile(name: string): string {
    return path.join(this.confDir(name), 'lxc.log');
  }

  /** Renders the container's config (config.ts) and writes it atomically (temporary file, fsync, rename); 0600: it holds the environment. */
  async writeConfig(rec: ContainerRecord, at: { rootfs: RootfsPlacement; bridge: string | null }): Promise<boolean> {
    const name = lxcNameOf(rec.lxcid);
    const host = await this.d.host();
    const text = renderConfig({
      rec,
      lxcName: name,
      rootfs: at.rootfs.kind === 'loop' ? `loop:${at.rootfs.path}` : `dir:${at.rootfs.path}`,
      bridge: at.bridge,
      logFile: this.logFile(name),
      cgroupDirs: this.d.cgroupDirs(rec.lxcid),
      host: { cgroupKeys: host.cgroups.version === 'v2' ? 'v2' : 'v1', apparmor: host.apparmor },
      mountIsDir: (m) => {
        try {
          return fs.statSync(m.host_path).isDirectory();
        } catch {
          return true;
        }
      },
      mountSource: (i) => stagingEntry(this.confDir(name), i),
    });
    const file = this.configFile(name);
    // Read at once (a small file, on every start): four trips through the thread pool cost more than the read.
    try {
      if (fs.readFileSync(file, 'utf8') === text) return false;
    } catch {
      /* absent */
    }
    await fsp.mkdir(this.confDir(name), { recursive: true, mode: 0o711 });
    const tmp = `${file}.${crypto.randomBytes(4).toString('hex')}.tmp`;
    const fh = await fsp.open(tmp, 'wx', 0o600);
    try {
      await fh.writeFile(text);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fsp.rename(tmp, file);
    return true;
  }

  /** Removes the container's directory; mount staging a crash left below it is unmounted first. */
  async removeConfig(name: string): Promise<void> {
    await this.d.remove(this.confDir(name));
  }

  /** Names of container dirs under the lxcpath. */
  async listConfigDirs(): Promise<string[]> {
    try {
      return (await fsp.readdir(this.lxcPath, { withFileTypes: true })).filter((d) => d.isDirectory()).map((d) => d.name);
    } catch {
      return [];
    }
  }

  private base(name: string): string[] {
    return ['-P', this.lxcPath, '-n', name];
  }

  /** The last lines of the container's LXC log that say what went wrong. */
  private logTail(name: string): string {
    try {
      const text = fs.readFileSync(this.logFile(name), 'utf8');
      const lines = text
        .split('\n')
        .filter((l) => /ERROR|WARN/.test(l))
        .slice(-4);
      return lines.map((l) => l.replace(/^\S+ \S+ \S+ +/, '').replace(/ - \.\.\/src\/lxc\/[^ ]+ - /, ' - ')).join('; ');
    } catch {
      return '';
    }
  }

  /** Empties the container's LXC log (WARN and above only: small), so that a failed start's tail is its own. */
  private truncateLog(name: string): void {
    try {
      fs.truncateSync(this.logFile(name), 0);
    } catch {
      /* no log yet */
    }
  }

  async info(name: string): Promise<{ state: LxcState | null; pid: number | null; ips: string[] }> {
    const r = await run('lxc-info', [...this.base(name), '-s', '-p', '-i'], { timeoutMs: 15_000, okCodes: [0, 1], install: INSTALL });
    if (r.code !== 0) return { state: null, pid: null, ips: [] };
    return parseLxcInfo(r.stdout);
  }

  /** The container's state: cgroup files first (no program run), lxc-info when they say nothing. */
  async state(name: string): Promise<LxcState> {
    const fast = this.cgroups.fastState(name);
    if (fast) return fast;
    const i = await this.info(name);
    return i.state ?? 'STOPPED';
  }

  async start(name: string): Promise<void> {
    this.truncateLog(name);
    try {
      await run('lxc-start', this.base(name), { timeoutMs: 120_000, install: INSTALL });
    } catch (err) {
      const tail = this.logTail(name);
      if (err instanceof ProgramError) throw internal(`lxc-start failed${tail ? `: ${tail}` : `: ${err.message}`}`);
      throw err;
    }
  }

  /** Clean shutdown (the halt signal to init), hard stop after `timeoutS`; -k kills at once. */
  async stop(name: string, timeoutS: number): Promise<void> {
    const args = timeoutS > 0 ? [...this.base(name), '-t', String(timeoutS)] : [...this.base(name), '-k'];
    const r = await run('lxc-stop', args, { timeoutMs: (timeoutS + 30) * 1000, okCodes: [0, 1, 2], install: INSTALL });
    if (r.code !== 0 && (await this.state(name)) !== 'STOPPED') throw internal(`lxc-stop failed: ${r.stderr.trim() || `exit ${r.code}`}`);
  }

  async freeze(name: string): Promise<void> {
    await run('lxc-freeze', this.base(name), { timeoutMs: 30_000, install: INSTALL });
  }

  async unfreeze(name: string): Promise<void> {
    await run('lxc-unfreeze', this.base(name), { timeoutMs: 30_000, install: INSTALL });
  }

  /** Live CPU and memory limits of a running container (lxc-cgroup, with the keys of this host's cgroup layout). */
  async setLimits(name: string, limits: { cpuCores?: number; memoryMb?: number }): Promise<void> {
    const keys = [
      ...(limits.cpuCores ? this.cgroups.cpuLimitKeys(limits.cpuCores, CPU_PERIOD_US) : []),
      ...(limits.memoryMb ? this.cgroups.memoryLimitKeys(limits.memoryMb) : []),
    ];
    for (const [k, v] of keys) await run('lxc-cgroup', [...this.base(name), k, v], { timeoutMs: 15_000, install: INSTALL });
  }

  /**
   * Runs `/bin/sh -c command` in the container with a clean environment (the
   * container's `lxc.environment` plus a marker), stdin at its end. Output
   * flows through one BoundedOutput per stream (EXEC_STREAM_CAP_BYTES each,
   * the rest read and dropped): a command that floods is never blocked and
   * never grows the daemon. At the deadline every process that carries the
   * marker (the command and anything it started, even detached) is killed
   * with SIGKILL, so lxc-attach returns with what the command printed so far.
   */
  async exec(name: string, command: string, timeoutMs: number): Promise<ExecResult> {
    const marker = crypto.randomBytes(12).toString('hex');
    const started = performance.now();
    let timedOut = false;
    const abort = new AbortController();
    const killMarked = () => {
      timedOut = true;
      for (const pid of this.cgroups.procs(name)) {
        try {
          const env = fs.readFileSync(`/proc/${pid}/environ`, 'latin1');
          if (env.includes(`HOSTD_EXEC=${marker}`)) process.kill(pid, 'SIGKILL');
        } catch {
          /* gone meanwhile */
        }
      }
      // If lxc-attach itself does not return soon after, stop waiting for it.
      setTimeout(() => abort.abort(), 3000).unref();
    };
    const timer = setTimeout(killMarked, timeoutMs);
    try {
      const r = await runBounded(
        'lxc-attach',
        [...this.base(name), '--clear-env', '-v', `HOSTD_EXEC=${marker}`, '-v', 'HOME=/root', '--', '/bin/sh', '-c', command],
        {
          timeoutMs: 0,
          signal: abort.signal,
          install: INSTALL,
        },
      );
      return {
        exit_code: timedOut ? null : r.code,
        stdout: r.stdout.text(),
        stderr: r.stderr.text(),
        truncated: r.stdout.truncated || r.stderr.truncated,
        timed_out: timedOut,
        duration_ms: Math.round(performance.now() - started),
      };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Network counters and addresses, read through any process of the container (its network namespace). */
  network(name: string): { interfaces: ReturnType<typeof parseNetDev>; addresses: string[] } | null {
    const pid = this.cgroups.procs(name)[0];
    if (!pid) return null;
    try {
      const dev = fs.readFileSync(`/proc/${pid}/net/dev`, 'utf8');
      let addrs: string[] = [];
      try {
        addrs = parseFibTrieLocal(fs.readFileSync(`/proc/${pid}/net/fib_trie`, 'utf8'));
      } catch {
        /* no IPv4 */
      }
      try {
        addrs = addrs.concat(parseIfInet6(fs.readFileSync(`/proc/${pid}/net/if_inet6`, 'utf8')));
      } catch {
        /* no IPv6 */
      }
      return { interfaces: parseNetDev(dev), addresses: addrs };
    } catch {
      return null;
    }
  }

  /** statfs of the running container's root filesystem (through /proc/<pid>/root). */
  async rootStatfs(name: string): Promise<{ total_bytes: number; free_bytes: number } | null> {
    const pid = this.cgroups.procs(name)[0];
    if (!pid) return null;
    try {
      const s = await fsp.statfs(`/proc/${pid}/root`);
      return { total_bytes: s.blocks * s.bsize, free_bytes: s.bavail * s.bsize };
    } catch {
      return null;
    }
  }
}
