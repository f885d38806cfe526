/**
 * The mount table as this process sees it (/proc/self/mountinfo), and the
 * helper processes found in /proc. Pure parsers plus thin readers.
 */
import fs from 'node:fs/promises';
import { run } from '../../lib/run.js';

export interface MountEntry {
  mountPoint: string;
  fsType: string;
  source: string;
}

/** Undoes mountinfo's octal escapes (\040 space, \011 tab, \012 newline, \134 backslash). */
export function unescapeMount(s: string): string {
  return s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
}

/** Parses /proc/<pid>/mountinfo text. */
export function parseMountinfo(text: string): MountEntry[] {
  const out: MountEntry[] = [];
  for (const line of text.split('\n')) {
    if (!line) continue;
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const left = line.slice(0, dash).split(' ');
    const right = line.slice(dash + 3).split(' ');
    if (left.length < 5 || right.length < 2) continue;
    out.push({ mountPoint: unescapeMount(left[4]), fsType: right[0], source: unescapeMount(right[1]) });
  }
  return out;
}

export async function mountTable(): Promise<MountEntry[]> {
  return parseMountinfo(await fs.readFile('/proc/self/mountinfo', 'utf8'));
}

/** The entry mounted on `dir` (the topmost when stacked), or null. */
export async function mountAt(dir: string): Promise<MountEntry | null> {
  const all = (await mountTable()).filter((m) => m.mountPoint === dir);
  return all.length ? all[all.length - 1] : null;
}

/**
 * Processes whose program is `argv0` and that have `arg` among their
 * arguments, without their own children of the same kind (smbnetfs forks
 * workers with the same argument list: the first one is the helper).
 */
export async function findProcesses(argv0: string, arg: string): Promise<number[]> {
  const found = new Map<number, number>();
  let names: string[];
  try {
    names = await fs.readdir('/proc');
  } catch {
    return [];
  }
  await Promise.all(
    names.map(async (n) => {
      if (!/^\d+$/.test(n)) return;
      try {
        const argv = (await fs.readFile(`/proc/${n}/cmdline`, 'utf8')).split('\0');
        if (!argv[0] || !(argv[0] === argv0 || argv[0].endsWith(`/${argv0}`)) || !argv.includes(arg)) return;
        const stat = await fs.readFile(`/proc/${n}/stat`, 'utf8');
        const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        if (rest[0] === 'Z' || rest[0] === 'X') return;
        found.set(Number(n), Number(rest[1]));
      } catch {
        /* gone meanwhile */
      }
    }),
  );
  return [...found.entries()]
    .filter(([, ppid]) => !found.has(ppid))
    .map(([pid]) => pid)
    .sort((a, b) => a - b);
}

/** Whether `pid` is alive (not a zombie). */
export async function alive(pid: number): Promise<boolean> {
  try {
    const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}

/** Unmounts `dir` (lazily when busy); nothing mounted is fine. */
export async function umount(dir: string): Promise<void> {
  if (!(await mountAt(dir))) return;
  try {
    await run('umount', [dir], { timeoutMs: 20_000 });
  } catch (err) {
    if (!(await mountAt(dir))) return;
    // Busy (an open file) or a dead server: detach it now, the kernel finishes when it can.
    await run('umount', ['-l', dir], { timeoutMs: 20_000 }).catch(() => {
      throw err;
    });
  }
}

/**
 * Unmounts `dir` whatever serves it, and ends an smbnetfs serving it: smbnetfs
 * does not always exit when its mount goes, so its process group (it and its
 * workers) is ended too.
 */
export async function releaseMount(dir: string): Promise<void> {
  const pids = await findProcesses('smbnetfs', dir);
  await umount(dir);
  await endProcesses(pids);
}

/** SIGTERM each process group, then SIGKILL what is left after a grace period. */
async function endProcesses(pids: number[]): Promise<void> {
  const kill = (pid: number, sig: NodeJS.Signals) => {
    try {
      process.kill(-pid, sig);
    } catch {
      try {
        process.kill(pid, sig);
      } catch {
        /* gone */
      }
    }
  };
  const waitGone = async (ms: number) => {
    const end = Date.now() + ms;
    while (Date.now() < end) {
      const left = (await Promise.all(pids.map(alive))).some(Boolean);
      if (!left) return true;
      await new Promise((r) => setTimeout(r, 50));
    }
    return false;
  };
  if (!pids.length || (await waitGone(500))) return;
  for (const p of pids) kill(p, 'SIGTERM');
  if (await waitGone(2000)) return;
  for (const p of pids) kill(p, 'SIGKILL');
  await waitGone(2000);
}
