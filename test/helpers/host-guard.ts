/**
 * What the escalation suite checks after every attempt: that nothing outside
 * what the attacking token may reach was read, changed or left running.
 *
 * - Sentinels: files with a random secret, planted in places no scope may
 *   reach (a directory outside every root, and each internal directory hostd
 *   keeps for itself). `assertIntact` checks they are unchanged; `assertNotLeaked`
 *   checks a text (an exec's output, a response, a proxied request) holds none of
 *   their secrets.
 * - The host: `/proc/sys/kernel/core_pattern` and the host's mount table,
 *   snapshotted before and compared after.
 * - Processes: none whose command line carries the attempt's marker runs as
 *   host uid 0.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';

export interface Sentinel {
  file: string;
  secret: string;
  mtimeMs: number;
}

export class HostGuard {
  readonly sentinels: Sentinel[] = [];
  private corePattern = '';
  private mounts = new Set<string>();

  /** Plants a sentinel file (mode 0600, root) in each directory, creating the directory when missing. */
  plant(...dirs: string[]): Sentinel[] {
    const made: Sentinel[] = [];
    for (const dir of dirs) {
      fs.mkdirSync(dir, { recursive: true });
      const secret = `sentinel-${crypto.randomBytes(16).toString('hex')}`;
      const file = path.join(dir, `hostd-sentinel-${crypto.randomBytes(4).toString('hex')}`);
      fs.writeFileSync(file, `${secret}\n`, { mode: 0o600 });
      const s = { file, secret, mtimeMs: fs.statSync(file).mtimeMs };
      this.sentinels.push(s);
      made.push(s);
    }
    return made;
  }

  /** Records the host state the attempts must not change. */
  snapshot(): this {
    this.corePattern = readCorePattern();
    this.mounts = hostMounts();
    return this;
  }

  /** Every sentinel still there, with its content and modification time. */
  assertIntact(): void {
    for (const s of this.sentinels) {
      expect(fs.existsSync(s.file), `${s.file} is gone`).to.equal(true);
      expect(fs.readFileSync(s.file, 'utf8'), `${s.file} changed`).to.equal(`${s.secret}\n`);
      expect(fs.statSync(s.file).mtimeMs, `${s.file} was written`).to.equal(s.mtimeMs);
    }
  }

  /** No sentinel's secret appears in `text`. */
  assertNotLeaked(text: string, what = 'the answer'): void {
    for (const s of this.sentinels) expect(text.includes(s.secret), `${what} holds the secret of ${s.file}`).to.equal(false);
  }

  /**
   * core_pattern unchanged, and no new mount in the host's mount namespace
   * outside `allowedUnder`. `opts.ignore` leaves out mount points that other
   * tests running at the same time on a shared machine make (see
   * `concurrentTestMount`); without it every new mount counts.
   */
  assertHostUnchanged(allowedUnder: string[] = [], opts: { ignore?: (mountPoint: string) => boolean } = {}): void {
    expect(readCorePattern(), 'kernel.core_pattern changed').to.equal(this.corePattern);
    const added = [...hostMounts()].filter(
      (m) => !this.mounts.has(m) && !allowedUnder.some((a) => m === a || m.startsWith(a.endsWith('/') ? a : `${a}/`)) && !opts.ignore?.(m),
    );
    expect(added, 'new mounts on the host').to.deep.equal([]);
  }

  /** No process whose command line contains `marker` runs as host root. */
  assertNoRootProcess(marker: string): void {
    expect(rootProcessesWith(marker), `processes carrying '${marker}' run as host root`).to.deep.equal([]);
  }

  /** Removes every planted sentinel. */
  remove(): void {
    for (const s of this.sentinels.splice(0)) fs.rmSync(s.file, { force: true });
  }
}

/**
 * A predicate for `assertHostUnchanged`'s `ignore`: mount points that tests
 * running beside this one make and remove on their own (network namespace
 * handles under /run/netns, and anything in another test's directory under
 * the temporary directory), for a suite whose attempts cannot mount anything
 * there. Mounts under `ownRoots` (the test's own directories) still count.
 */
export function concurrentTestMount(ownRoots: string[], tmp = os.tmpdir()): (mountPoint: string) => boolean {
  const under = (m: string, d: string) => m === d || m.startsWith(d.endsWith('/') ? d : `${d}/`);
  return (m) => under(m, '/run/netns') || (under(m, tmp) && !ownRoots.some((r) => under(m, r)));
}

export function readCorePattern(): string {
  return fs.readFileSync('/proc/sys/kernel/core_pattern', 'utf8');
}

/** Mount points of the host's (this process's) mount namespace. */
export function hostMounts(): Set<string> {
  const out = new Set<string>();
  for (const line of fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const f = line.split(' ');
    if (f.length > 4) out.add(f[4].replace(/\\040/g, ' '));
  }
  return out;
}

/** `pid: cmdline` of every process with real or effective uid 0 (as the host sees it) whose command line contains `marker`. */
export function rootProcessesWith(marker: string): string[] {
  const found: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      if (!cmd.includes(marker) || Number(pid) === process.pid) continue;
      const uid = /^Uid:\s+(\d+)\s+(\d+)/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (uid && (uid[1] === '0' || uid[2] === '0')) found.push(`${pid}: ${cmd}`);
    } catch {
      /* gone meanwhile */
    }
  }
  return found;
}
