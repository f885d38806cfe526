/**
 * Cgroup facts and figures. Each container's config names its cgroup
 * (`lxc.cgroup.dir.container = hostd-<hash of the lxcpath>/ct-<lxcid>`), so two
 * hostd instances (or another LXC user with a container of the same name)
 * never share one, and LXC (as root) makes it at the root of each hierarchy.
 * Reading the container's state and usage is then a few small file reads,
 * with no program to run: that keeps `exec` and `list` cheap.
 *
 * Hierarchies: v1 (controllers each mounted under /sys/fs/cgroup/<c>), hybrid
 * (v1 controllers plus an empty cgroup2 at /sys/fs/cgroup/unified: LXC applies
 * v1 keys), or v2 (one unified hierarchy at /sys/fs/cgroup).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { CgroupFigures } from '../driver.js';

export type CgroupVersion = 'v1' | 'hybrid' | 'v2';

export interface CgroupLayout {
  version: CgroupVersion;
  /** v1 controller name -> mount point. */
  v1: Record<string, string>;
  /** Mount point of the cgroup2 hierarchy, if any. */
  unified: string | null;
  /** Controllers available to containers (v1 mounts, or v2 cgroup.controllers). */
  controllers: string[];
}

/** Parses /proc/self/mounts (or /proc/mounts) text into the cgroup layout. */
export function parseCgroupMounts(mounts: string, unifiedControllers: (dir: string) => string[] = () => []): CgroupLayout {
  const v1: Record<string, string> = {};
  let unified: string | null = null;
  for (const line of mounts.split('\n')) {
    const f = line.split(' ');
    if (f.length < 4) continue;
    const [, dir, type, opts] = f;
    const mp = dir.replace(/\\040/g, ' ');
    if (type === 'cgroup2') {
      if (!unified || mp === '/sys/fs/cgroup') unified = mp;
    } else if (type === 'cgroup') {
      for (const o of opts.split(',')) {
        if (['rw', 'ro', 'nosuid', 'nodev', 'noexec', 'relatime', 'noatime'].includes(o) || o.includes('=')) continue;
        v1[o] = mp;
      }
    }
  }
  const hasV1 = Object.keys(v1).some((c) => c !== 'name=systemd' && !c.startsWith('name='));
  if (!hasV1 && unified) return { version: 'v2', v1: {}, unified, controllers: unifiedControllers(unified) };
  return {
    version: unified ? 'hybrid' : 'v1',
    v1,
    unified,
    controllers: Object.keys(v1)
      .filter((c) => !c.startsWith('name='))
      .sort(),
  };
}

export function readCgroupLayout(): CgroupLayout {
  let text = '';
  try {
    text = fs.readFileSync('/proc/self/mounts', 'utf8');
  } catch {
    /* no /proc: no cgroups */
  }
  return parseCgroupMounts(text, (dir) => {
    try {
      return fs.readFileSync(path.join(dir, 'cgroup.controllers'), 'utf8').trim().split(/\s+/).filter(Boolean).sort();
    } catch {
      return [];
    }
  });
}

/** Which controllers containers need for what hostd promises, by layout. */
export function missingControllers(l: CgroupLayout): string[] {
  const need = l.version === 'v2' ? ['cpu', 'memory', 'pids'] : ['cpu', 'cpuacct', 'memory', 'freezer', 'pids'];
  return need.filter((c) => !l.controllers.includes(c));
}

function isDir(p: string): boolean {
  try {
    return fs.statSync(p).isDirectory();
  } catch {
    return false;
  }
}

function subdirs(dir: string): string[] {
  try {
    return fs
      .readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return [];
  }
}

/** Whether a cgroup or any cgroup below it holds a process. */
function treeHasProcs(dir: string): boolean {
  const procs = readText(path.join(dir, 'cgroup.procs'));
  if (procs === null || procs.trim() !== '') return true;
  return subdirs(dir).some((c) => treeHasProcs(path.join(dir, c)));
}

/** rmdir of a cgroup (its control files go with it); false when the kernel refuses (busy, gone). */
function rmdirQuiet(dir: string): boolean {
  try {
    fs.rmdirSync(dir);
    return true;
  } catch {
    return false;
  }
}

function removeTree(dir: string, removed: string[]): void {
  for (const c of subdirs(dir)) removeTree(path.join(dir, c), removed);
  if (rmdirQuiet(dir)) removed.push(dir);
}

function readText(p: string): string | null {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch {
    return null;
  }
}

const num = (s: string | null): number | null => {
  if (s === null) return null;
  const t = s.trim();
  if (t === 'max') return null;
  const n = Number(t);
  return Number.isFinite(n) ? n : null;
};

/** Parses `key value` lines (memory.stat, cpu.stat, cgroup.events). */
export function parseKeyValues(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const [k, v] = line.trim().split(/\s+/);
    if (k && v !== undefined && Number.isFinite(Number(v))) out[k] = Number(v);
  }
  return out;
}

/** hostd's own cgroup per v1 controller ('' for the unified hierarchy), from /proc/self/cgroup text. */
export function parseProcCgroup(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of text.split('\n')) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line.trim());
    if (!m) continue;
    for (const c of m[1].split(',')) out[c] = m[2];
  }
  return out;
}

export class CgroupReader implements CgroupFigures {
  private readonly own: Record<string, string>;

  /**
   * `payload(lxcName)`: the container's cgroup path as its config names it.
   * LXC (as root) makes it at the root of each hierarchy; where it stays below
   * hostd's own cgroup instead (lxc.cgroup.relative, some systemd setups), the
   * reader finds it there.
   */
  constructor(
    readonly layout: CgroupLayout,
    private readonly payload: (lxcName: string) => string,
    private readonly group: string | null = null,
  ) {
    let text = '';
    try {
      text = fs.readFileSync('/proc/self/cgroup', 'utf8');
    } catch {
      /* no /proc */
    }
    this.own = parseProcCgroup(text);
  }

  private pick(mount: string, own: string | undefined, lxcName: string): string {
    const atRoot = path.join(mount, this.payload(lxcName));
    if (!own || own === '/' || fs.existsSync(atRoot)) return atRoot;
    const below = path.join(mount, own, this.payload(lxcName));
    return fs.existsSync(below) ? below : atRoot;
  }

  private dir(ctrl: string, lxcName: string): string | null {
    if (this.layout.version === 'v2') return this.layout.unified ? this.pick(this.layout.unified, this.own[''], lxcName) : null;
    const mp = this.layout.v1[ctrl];
    return mp ? this.pick(mp, this.own[ctrl], lxcName) : null;
  }

  private file(ctrl: string, lxcName: string, v1file: string, v2file: string): string | null {
    const d = this.dir(ctrl, lxcName);
    return d ? path.join(d, this.layout.version === 'v2' ? v2file : v1file) : null;
  }

  /**
   * Removes this hostd's cgroup group (`hostd-<hash>`) where nothing uses it
   * any more, in every hierarchy: LXC removes a container's `ct-<id>` and
   * `mon-<id>` when it stops, but leaves the group's own directory, and a
   * crash may leave the others. A child whose tree holds a process (a running
   * container or its monitor) is left alone with everything below it (the
   * container's own sub-cgroups are its business); the rest is removed
   * deepest first, and the group itself once it is empty. Returns the
   * directories removed.
   */
  pruneGroup(): string[] {
    if (!this.group) return [];
    const removed: string[] = [];
    const mounts = new Set<string>(Object.values(this.layout.v1));
    if (this.layout.unified) mounts.add(this.layout.unified);
    const owns = new Set<string>(Object.values(this.own).filter((o) => o && o !== '/'));
    for (const mp of mounts) {
      const bases = [path.join(mp, this.group), ...[...owns].map((o) => path.join(mp, o, this.group!))];
      for (const base of new Set(bases)) {
        if (!isDir(base)) continue;
        for (const child of subdirs(base)) {
          const dir = path.join(base, child);
          if (treeHasProcs(dir)) continue;
          removeTree(dir, removed);
        }
        if (subdirs(base).length === 0 && rmdirQuiet(base)) removed.push(base);
      }
    }
    return removed;
  }

  /** Host pids in the container's payload cgroup (empty when it is not running). */
  procs(lxcName: string): number[] {
    const f =
      this.file(this.layout.version === 'v2' ? '' : 'pids', lxcName, 'cgroup.procs', 'cgroup.procs') ??
      this.file('freezer', lxcName, 'cgroup.procs', 'cgroup.procs');
    const t = f ? readText(f) : null;
    if (!t) return [];
    return t
      .split('\n')
      .map((s) => Number(s))
      .filter((n) => Number.isInteger(n) && n > 0);
  }

  /**
   * RUNNING or FROZEN from the cgroup files; null when they say nothing (no
   * payload cgroup: stopped, or started where hostd does not look).
   */
  fastState(lxcName: string): 'RUNNING' | 'FROZEN' | null {
    if (this.procs(lxcName).length === 0) return null;
    if (this.layout.version === 'v2') {
      const ev = readText(path.join(this.dir('', lxcName)!, 'cgroup.events'));
      return ev && parseKeyValues(ev).frozen === 1 ? 'FROZEN' : 'RUNNING';
    }
    const f = this.file('freezer', lxcName, 'freezer.state', '');
    const s = f ? readText(f)?.trim() : null;
    if (s === 'FROZEN' || s === 'FREEZING') return 'FROZEN';
    return 'RUNNING';
  }

  /** CPU time used by the container, in nanoseconds. */
  cpuUsageNs(lxcName: string): number | null {
    if (this.layout.version === 'v2') {
      const t = readText(path.join(this.dir('', lxcName)!, 'cpu.stat'));
      const us = t ? parseKeyValues(t).usage_usec : undefined;
      return us === undefined ? null : us * 1000;
    }
    const f = this.file('cpuacct', lxcName, 'cpuacct.usage', '');
    return f ? num(readText(f)) : null;
  }

  memory(lxcName: string): { used_bytes: number | null; limit_bytes: number | null; cache_bytes: number | null } {
    if (this.layout.version === 'v2') {
      const d = this.dir('', lxcName)!;
      const stat = readText(path.join(d, 'memory.stat'));
      return {
        used_bytes: num(readText(path.join(d, 'memory.current'))),
        limit_bytes: num(readText(path.join(d, 'memory.max'))),
        cache_bytes: stat ? (parseKeyValues(stat).file ?? null) : null,
      };
    }
    const d = this.dir('memory', lxcName);
    if (!d) return { used_bytes: null, limit_bytes: null, cache_bytes: null };
    const stat = readText(path.join(d, 'memory.stat'));
    const limit = num(readText(path.join(d, 'memory.limit_in_bytes')));
    // v1 reports "no limit" as a huge page-aligned number.
    return {
      used_bytes: num(readText(path.join(d, 'memory.usage_in_bytes'))),
      limit_bytes: limit !== null && limit < 2 ** 62 ? limit : null,
      cache_bytes: stat ? (parseKeyValues(stat).total_cache ?? parseKeyValues(stat).cache ?? null) : null,
    };
  }

  pids(lxcName: string): number | null {
    const f = this.file('pids', lxcName, 'pids.current', 'pids.current');
    return f ? num(readText(f)) : null;
  }

  ioBytes(lxcName: string): { read_bytes: number; written_bytes: number } | null {
    if (this.layout.version === 'v2') {
      const t = readText(path.join(this.dir('', lxcName)!, 'io.stat'));
      return t === null ? null : parseIoStat(t);
    }
    // The recursive file: the container's own processes sit in cgroups below its payload cgroup.
    const f = this.file('blkio', lxcName, 'blkio.throttle.io_service_bytes_recursive', '');
    const t = f ? readText(f) : null;
    return t === null ? null : parseBlkioBytes(t);
  }

  /** The key and value that set the CPU limit now (for lxc-cgroup on a running container). */
  cpuLimitKeys(cores: number, periodUs: number): Array<[string, string]> {
    if (this.layout.version === 'v2') return [['cpu.max', `${cores * periodUs} ${periodUs}`]];
    return [
      ['cpu.cfs_period_us', String(periodUs)],
      ['cpu.cfs_quota_us', String(cores * periodUs)],
    ];
  }

  memoryLimitKeys(mb: number): Array<[string, string]> {
    const bytes = String(mb * 1024 * 1024);
    return this.layout.version === 'v2' ? [['memory.max', bytes]] : [['memory.limit_in_bytes', bytes]];
  }
}

/** Sums the Read and Write lines of a v1 `blkio.throttle.io_service_bytes*` file over its devices. */
export function parseBlkioBytes(text: string): { read_bytes: number; written_bytes: number } {
  let read = 0;
  let written = 0;
  for (const line of text.split('\n')) {
    const [dev, op, v] = line.trim().split(/\s+/);
    if (!dev?.includes(':') || !Number.isFinite(Number(v))) continue;
    if (op === 'Read') read += Number(v);
    else if (op === 'Write') written += Number(v);
  }
  return { read_bytes: read, written_bytes: written };
}

/** Sums `rbytes` and `wbytes` of a v2 `io.stat` file over its devices. */
export function parseIoStat(text: string): { read_bytes: number; written_bytes: number } {
  let read = 0;
  let written = 0;
  for (const line of text.split('\n')) {
    for (const kv of line.trim().split(/\s+/).slice(1)) {
      const [k, v] = kv.split('=');
      if (k === 'rbytes') read += Number(v) || 0;
      else if (k === 'wbytes') written += Number(v) || 0;
    }
  }
  return { read_bytes: read, written_bytes: written };
}

/** Parses /proc/<pid>/net/dev into per-interface counters (loopback left out). */
export function parseNetDev(text: string): Array<{ name: string; rx_bytes: number; rx_packets: number; tx_bytes: number; tx_packets: number }> {
  const out = [];
  for (const line of text.split('\n').slice(2)) {
    const i = line.indexOf(':');
    if (i < 0) continue;
    const name = line.slice(0, i).trim();
    const f = line
      .slice(i + 1)
      .trim()
      .split(/\s+/)
      .map(Number);
    if (name === 'lo' || f.length < 16) continue;
    out.push({ name, rx_bytes: f[0], rx_packets: f[1], tx_bytes: f[8], tx_packets: f[9] });
  }
  return out;
}

/**
 * The local IPv4 addresses of a network namespace from /proc/<pid>/net/fib_trie
 * (its "host LOCAL" leaves), loopback left out.
 */
export function parseFibTrieLocal(text: string): string[] {
  const found = new Set<string>();
  const lines = text.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^\s*\|--\s+(\d+\.\d+\.\d+\.\d+)\s*$/.exec(lines[i]);
    if (!m) continue;
    for (let j = i + 1; j < lines.length && /^\s*\/\d+\s/.test(lines[j]); j++) {
      if (/host LOCAL/.test(lines[j]) && !m[1].startsWith('127.')) found.add(m[1]);
    }
  }
  return [...found].sort();
}

/** Global IPv6 addresses from /proc/<pid>/net/if_inet6 (scope 00), loopback left out. */
export function parseIfInet6(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 6 || f[5] === 'lo' || f[3] !== '00' || !/^[0-9a-f]{32}$/.test(f[0])) continue;
    out.push(
      f[0]
        .match(/.{4}/g)!
        .map((g) => g.replace(/^0+(?=.)/, ''))
        .join(':'),
    );
  }
  return out;
}
