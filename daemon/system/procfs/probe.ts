/**
 * Reads the host's figures: CPU, load, memory, uptime and the disk usage of a
 * directory. Linux sources (/proc) come first; each falls back to what `os`
 * offers when they are missing, so the daemon still answers elsewhere.
 */
import fs from 'node:fs';
import os from 'node:os';
import type { DiskUsage, MemoryFigures } from '../driver.js';
import { percent, round2 } from '../views.js';

// ---------------------------------------------------------------- CPU

/** Cumulative CPU time counters (any unit, as long as both samples share it). */
export interface CpuTimes {
  /** Everything, idle included. */
  total: number;
  /** Time doing nothing: idle plus iowait. */
  idle: number;
}

/**
 * Parses the aggregate `cpu` line of /proc/stat:
 * `cpu user nice system idle iowait irq softirq steal guest guest_nice`.
 * guest and guest_nice are already counted in user and nice, so they are left out.
 */
export function parseProcStat(text: string): CpuTimes | null {
  const line = text.split('\n').find((l) => /^cpu\s/.test(l));
  if (!line) return null;
  const f = line.trim().split(/\s+/).slice(1).map(Number);
  if (f.length < 4 || f.some((n) => !Number.isFinite(n))) return null;
  const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = f;
  return { total: user + nice + system + idle + iowait + irq + softirq + steal, idle: idle + iowait };
}

/** Cumulative counters from os.cpus(), summed over all CPUs (fallback when /proc/stat is unreadable). */
export function osCpuTimes(): CpuTimes {
  let total = 0;
  let idle = 0;
  for (const c of os.cpus()) {
    const t = c.times;
    total += t.user + t.nice + t.sys + t.idle + t.irq;
    idle += t.idle;
  }
  return { total, idle };
}

export async function readCpuTimes(): Promise<CpuTimes> {
  try {
    const parsed = parseProcStat(await fs.promises.readFile('/proc/stat', 'utf8'));
    if (parsed) return parsed;
  } catch {
    /* not Linux, or /proc not mounted */
  }
  return osCpuTimes();
}

/** Busy share of the time between two samples, 0-100; 0 when no time passed. */
export function cpuUsageBetween(a: CpuTimes, b: CpuTimes): number {
  const total = b.total - a.total;
  const idle = b.idle - a.idle;
  if (!(total > 0)) return 0;
  return percent(((total - idle) / total) * 100);
}

/** Takes two samples `intervalMs` apart and returns the busy percentage between them. */
export async function measureCpuUsage(intervalMs = 100): Promise<number> {
  const a = await readCpuTimes();
  await new Promise((r) => setTimeout(r, intervalMs));
  const b = await readCpuTimes();
  return cpuUsageBetween(a, b);
}

export interface CpuInfo {
  cores: number;
  model: string;
}

export function cpuInfo(): CpuInfo {
  const cpus = os.cpus();
  return {
    cores: cpus.length || os.availableParallelism(),
    model: cpus[0]?.model?.trim() || 'unknown',
  };
}

/**
 * Samples CPU usage in the background so a request reads the latest figure
 * instead of waiting for two samples. The timer is unref'd: it never keeps the
 * process alive. `usagePercent` is null until two samples have been taken.
 */
export class CpuSampler {
  private timer: NodeJS.Timeout | null = null;
  private last: CpuTimes | null = null;
  private busy = false;
  private usage: number | null = null;
  private at: number | null = null;

  constructor(readonly intervalMs = 2000) {}

  get running(): boolean {
    return this.timer !== null;
  }

  /** Latest busy percentage, or null before the first interval completed. */
  get usagePercent(): number | null {
    return this.usage;
  }

  /** Epoch ms of the latest figure, or null. */
  get sampledAt(): number | null {
    return this.at;
  }

  start(): this {
    if (this.timer) return this;
    this.timer = setInterval(() => void this.sample(), this.intervalMs);
    this.timer.unref();
    void this.sample();
    return this;
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.last = null;
  }

  /** Takes one sample; after the second, the usage figure is available. */
  async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const now = await readCpuTimes();
      if (!this.timer) return; // stopped while reading
      if (this.last && now.total > this.last.total) {
        this.usage = cpuUsageBetween(this.last, now);
        this.at = Date.now();
      }
      this.last = now;
    } catch {
      /* keep the previous figure */
    } finally {
      this.busy = false;
    }
  }
}

/** 1, 5 and 15 minute load averages. */
export function loadAverages(): [number, number, number] {
  const [a = 0, b = 0, c = 0] = os.loadavg();
  return [round2(a), round2(b), round2(c)];
}

// ------------------------------------------------------------- memory

/**
 * Parses /proc/meminfo (values in kB) into bytes. MemAvailable is missing on
 * kernels before 3.14; MemFree + Buffers + Cached approximates it there.
 */
export function parseMeminfo(text: string): MemoryFigures | null {
  const kb = new Map<string, number>();
  for (const line of text.split('\n')) {
    const m = /^(\w+(?:\(\w+\))?):\s+(\d+)(?:\s+kB)?\s*$/.exec(line);
    if (m) kb.set(m[1]!, Number(m[2]));
  }
  const total = kb.get('MemTotal');
  if (total === undefined) return null;
  let available = kb.get('MemAvailable');
  if (available === undefined) {
    const free = kb.get('MemFree');
    if (free === undefined) return null;
    available = free + (kb.get('Buffers') ?? 0) + (kb.get('Cached') ?? 0);
  }
  return { total_bytes: total * 1024, available_bytes: Math.min(available, total) * 1024 };
}

export async function readMemory(): Promise<MemoryFigures> {
  try {
    const parsed = parseMeminfo(await fs.promises.readFile('/proc/meminfo', 'utf8'));
    if (parsed) return parsed;
  } catch {
    /* not Linux */
  }
  return { total_bytes: os.totalmem(), available_bytes: os.freemem() };
}

// ------------------------------------------------------------- uptime

/** Host uptime in whole seconds (/proc/uptime, else os.uptime()). */
export async function readUptime(): Promise<number> {
  try {
    const first = Number((await fs.promises.readFile('/proc/uptime', 'utf8')).trim().split(/\s+/)[0]);
    if (Number.isFinite(first) && first >= 0) return Math.floor(first);
  } catch {
    /* not Linux */
  }
  return Math.floor(os.uptime());
}

// --------------------------------------------------------------- disk

/** Usage of the filesystem holding `dir`. Throws what statfs throws (ENOENT for a missing directory). */
export async function diskUsage(dir: string): Promise<DiskUsage> {
  const s = await fs.promises.statfs(dir, { bigint: true });
  return {
    total_bytes: Number(s.blocks * s.bsize),
    free_bytes: Number(s.bfree * s.bsize),
    available_bytes: Number(s.bavail * s.bsize),
  };
}
