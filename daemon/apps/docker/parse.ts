/**
 * Pure parsers of the engine's answers: multiplexed log frames and the stats
 * document (cgroup v1 and v2 shapes), computed the way `docker stats` does.
 */
import type { ContainerStats, LogLine } from '../driver.js';

/** One line of `timestamps=true` output: `<RFC 3339 time> <text>`. */
function splitTime(line: string): { time: string; text: string } {
  const i = line.indexOf(' ');
  if (i > 0 && /^\d{4}-\d\d-\d\dT/.test(line)) return { time: line.slice(0, i), text: line.slice(i + 1) };
  return { time: '', text: line };
}

function linesOf(text: string, stream: 'stdout' | 'stderr', out: LogLine[]): void {
  const parts = text.split('\n');
  if (parts[parts.length - 1] === '') parts.pop();
  for (const p of parts) out.push({ ...splitTime(p.replace(/\r$/, '')), stream });
}

/**
 * The engine's log stream: without a TTY, frames of an 8-byte header (stream
 * 1 stdout, 2 stderr; big-endian length in bytes 4-7) and the payload; with a
 * TTY, raw text on stdout.
 */
export function parseLogFrames(buf: Buffer, tty: boolean): LogLine[] {
  const out: LogLine[] = [];
  if (tty) {
    linesOf(buf.toString('utf8'), 'stdout', out);
    return out;
  }
  let i = 0;
  let pending = { stdout: '', stderr: '' };
  while (i + 8 <= buf.length) {
    const type = buf[i];
    const size = buf.readUInt32BE(i + 4);
    const end = Math.min(buf.length, i + 8 + size);
    const stream = type === 2 ? 'stderr' : 'stdout';
    pending[stream] += buf.subarray(i + 8, end).toString('utf8');
    // A frame usually ends a line; keep a partial last line for the next frame of the same stream.
    const nl = pending[stream].lastIndexOf('\n');
    if (nl >= 0) {
      linesOf(pending[stream].slice(0, nl + 1), stream, out);
      pending = { ...pending, [stream]: pending[stream].slice(nl + 1) };
    }
    i = end;
  }
  for (const s of ['stdout', 'stderr'] as const) if (pending[s]) linesOf(pending[s], s, out);
  return out;
}

const num = (v: unknown): number => (typeof v === 'number' && Number.isFinite(v) ? v : 0);

/** CPU, memory, network and block I/O of one `stats?stream=false` answer. */
export function statsOf(s: Record<string, any>): ContainerStats {
  const cpu = s.cpu_stats ?? {};
  const pre = s.precpu_stats ?? {};
  const online = num(cpu.online_cpus) || (Array.isArray(cpu.cpu_usage?.percpu_usage) ? cpu.cpu_usage.percpu_usage.length : 0) || 1;
  const cpuDelta = num(cpu.cpu_usage?.total_usage) - num(pre.cpu_usage?.total_usage);
  const sysDelta = num(cpu.system_cpu_usage) - num(pre.system_cpu_usage);
  const cpuPercent = cpuDelta > 0 && sysDelta > 0 ? (cpuDelta / sysDelta) * online * 100 : 0;

  const mem = s.memory_stats ?? {};
  const ms = mem.stats ?? {};
  // As `docker stats`: page cache that can be dropped is not counted (v1 total_inactive_file, v2 inactive_file).
  const inactive = ms.total_inactive_file !== undefined ? num(ms.total_inactive_file) : num(ms.inactive_file);
  const usage = Math.max(0, num(mem.usage) - (inactive < num(mem.usage) ? inactive : 0));
  const limit = num(mem.limit);

  let rx = 0,
    tx = 0,
    rxp = 0,
    txp = 0;
  for (const n of Object.values((s.networks ?? {}) as Record<string, any>)) {
    rx += num(n.rx_bytes);
    tx += num(n.tx_bytes);
    rxp += num(n.rx_packets);
    txp += num(n.tx_packets);
  }
  let rd = 0,
    wr = 0;
  for (const e of (s.blkio_stats?.io_service_bytes_recursive ?? []) as Array<{ op?: string; value?: number }>) {
    const op = String(e.op ?? '').toLowerCase();
    if (op === 'read') rd += num(e.value);
    else if (op === 'write') wr += num(e.value);
  }
  return {
    cpu_percent: Math.round(cpuPercent * 100) / 100,
    cpu_total_ns: num(cpu.cpu_usage?.total_usage),
    online_cpus: online,
    memory: { usage_bytes: usage, limit_bytes: limit, percent: limit > 0 ? Math.round((usage / limit) * 10000) / 100 : 0 },
    network: { rx_bytes: rx, tx_bytes: tx, rx_packets: rxp, tx_packets: txp },
    block_io: { read_bytes: rd, write_bytes: wr },
    pids: num(s.pids_stats?.current),
    read_at: typeof s.read === 'string' ? s.read : new Date().toISOString(),
  };
}
