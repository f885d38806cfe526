/**
 * A running machine's figures for the metrics: CPU time and resident memory
 * of its QEMU process from /proc, block I/O from QMP `query-blockstats`,
 * and on a tap the host end's byte counters from /sys/class/net (user-mode
 * NAT counts nothing QEMU reports). Pure parsers beside the reads.
 */
import fs from 'node:fs/promises';
import type { MachineUsage } from '../driver.js';
import type { QmpClient } from './qmp.js';

/** Linux reports process times in USER_HZ ticks, 100 a second on every architecture hostd runs on. */
const USER_HZ = 100;

/** utime + stime in seconds from /proc/<pid>/stat (fields 14 and 15, counted after the command name, which may hold spaces). */
export function cpuSecondsOfStat(stat: string): number | null {
  const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const utime = Number(rest[11]);
  const stime = Number(rest[12]);
  return Number.isFinite(utime) && Number.isFinite(stime) ? (utime + stime) / USER_HZ : null;
}

/** VmRSS from /proc/<pid>/status, in bytes. */
export function rssOfStatus(status: string): number | null {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  return m ? Number(m[1]) * 1024 : null;
}

export interface BlockStat {
  qdev?: string;
  stats?: { rd_bytes?: number; wr_bytes?: number };
}

/** Bytes read and written over the guest's block devices (entries attached to a device; a node no device uses is not the guest's I/O). */
export function sumBlockStats(list: BlockStat[]): { read: number; written: number } {
  let read = 0;
  let written = 0;
  for (const b of list) {
    if (!b.qdev) continue;
    read += b.stats?.rd_bytes ?? 0;
    written += b.stats?.wr_bytes ?? 0;
  }
  return { read, written };
}

/** The host name of a tap netdev in HMP `info network` (QEMU names the tap when the netdev gives none); null without a tap. */
export function tapOfNetworkInfo(info: string): string | null {
  const m = /\btype=tap,ifname=([A-Za-z0-9_.-]{1,15})[,\s]/.exec(`${info}\n`);
  // The name goes into a /sys path: never one that climbs out of /sys/class/net.
  return m && m[1] !== '.' && m[1] !== '..' ? m[1] : null;
}

async function tapCounters(ifname: string): Promise<{ rx: number; tx: number } | null> {
  try {
    const dir = `/sys/class/net/${ifname}/statistics`;
    const [rx, tx] = await Promise.all([fs.readFile(`${dir}/rx_bytes`, 'utf8'), fs.readFile(`${dir}/tx_bytes`, 'utf8')]);
    return { rx: Number(rx.trim()), tx: Number(tx.trim()) };
  } catch {
    return null;
  }
}

/** The figures of the machine whose QEMU runs as `pid`, on its QMP connection; null when the process went meanwhile. */
export async function machineUsage(pid: number, qmp: QmpClient, timeoutMs = 3000): Promise<MachineUsage | null> {
  let stat: string;
  let status: string;
  try {
    [stat, status] = await Promise.all([fs.readFile(`/proc/${pid}/stat`, 'utf8'), fs.readFile(`/proc/${pid}/status`, 'utf8')]);
  } catch {
    return null;
  }
  const cpuSeconds = cpuSecondsOfStat(stat);
  const memoryBytes = rssOfStatus(status);
  if (cpuSeconds === null || memoryBytes === null) return null;
  const [blocks, network] = await Promise.all([
    qmp.execute<BlockStat[]>('query-blockstats', undefined, timeoutMs).then(sumBlockStats),
    qmp.execute<string>('human-monitor-command', { 'command-line': 'info network' }, timeoutMs).then((info) => {
      const tap = tapOfNetworkInfo(info);
      return tap ? tapCounters(tap) : null;
    }),
  ]);
  return {
    cpuSeconds,
    memoryBytes,
    diskReadBytes: blocks.read,
    diskWrittenBytes: blocks.written,
    // The host end of a tap receives what the guest sends.
    networkReceivedBytes: network ? network.tx : null,
    networkTransmittedBytes: network ? network.rx : null,
  };
}
