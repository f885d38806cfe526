/**
 * Upstream checks on the holder: a TCP connect to every entry's upstream
 * every `proxy.upstream_check_ms`; an upstream that starts failing (or fails
 * from the start) is an incident. Diagnostics run the same checks on demand.
 */
import net from 'node:net';
import type { ProxyContext } from './context.js';
import type { Incidents } from './incidents.js';
import type { Screening } from './screen.js';

export interface UpstreamCheck {
  entry: string;
  dial: string | null;
  reachable: boolean;
  error: string | null;
  latency_ms: number | null;
  checked_at: string;
}

/** TCP connect to `dial` (`host:port`, IPv6 bracketed) within `ms`. */
export function tcpCheck(dial: string, ms = 2000): Promise<{ ok: boolean; error: string | null; latency_ms: number | null }> {
  const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(dial);
  if (!m) return Promise.resolve({ ok: false, error: `'${dial}' is not host:port`, latency_ms: null });
  const t0 = process.hrtime.bigint();
  return new Promise((resolve) => {
    const s = net.connect({ host: m[1], port: Number(m[2]) });
    const done = (ok: boolean, error: string | null) => {
      s.destroy();
      resolve({ ok, error, latency_ms: ok ? Number(process.hrtime.bigint() - t0) / 1e6 : null });
    };
    s.setTimeout(ms, () => done(false, `no connection within ${ms} ms`));
    s.once('connect', () => done(true, null));
    s.once('error', (err) => done(false, err.message));
  });
}

export class UpstreamChecks {
  /** The last check of each entry, by entryKey(). */
  private readonly last = new Map<string, UpstreamCheck>();

  constructor(
    private readonly ctx: ProxyContext,
    private readonly screening: Screening,
    private readonly incidents: Incidents,
  ) {}

  /** Checks every entry's upstream now; `capture` records an incident when one starts failing. */
  async run(capture: boolean): Promise<UpstreamCheck[]> {
    if (!this.ctx.serving()) {
      this.last.clear();
      return [];
    }
    const dials = await this.screening.dials(this.ctx.config().config);
    const out: UpstreamCheck[] = [];
    await Promise.all(
      [...dials].map(async ([entry, d]) => {
        const at = new Date().toISOString();
        const r = 'dial' in d ? await tcpCheck(d.dial) : { ok: false, error: d.error, latency_ms: null };
        const c: UpstreamCheck = { entry, dial: 'dial' in d ? d.dial : null, reachable: r.ok, error: r.error, latency_ms: r.latency_ms, checked_at: at };
        const before = this.last.get(entry);
        this.last.set(entry, c);
        // A refused entry is listed in host-status; it is not an upstream failure.
        if (capture && !r.ok && (!before || before.reachable) && !('refused' in d && d.refused)) {
          await this.incidents.capture('upstream_failed', `Upstream of ${entry} (${c.dial ?? 'unresolved'}) failed its check: ${r.error}`, { check: c });
        }
        out.push(c);
      }),
    );
    for (const k of [...this.last.keys()]) if (!dials.has(k)) this.last.delete(k);
    return out.sort((a, b) => a.entry.localeCompare(b.entry));
  }
}
