/**
 * The `metrics:` section of the config file, validated. Every key is optional.
 *
 *   metrics:
 *     listen: 127.0.0.1:9464   # the token-less listener for scrapers (off when absent);
 *                              # a bare port listens on loopback (127.0.0.1)
 */
import net from 'node:net';

export interface MetricsSettings {
  /** Where the token-less listener listens; null: it is off. */
  listen: { host: string; port: number } | null;
}

const KEYS = ['listen'];

export function parseMetricsSettings(raw: unknown): MetricsSettings {
  const s = (raw ?? {}) as Record<string, unknown>;
  if (typeof s !== 'object' || Array.isArray(s)) throw new Error('config: metrics must be a mapping');
  for (const k of Object.keys(s)) if (!KEYS.includes(k)) throw new Error(`config: metrics.${k} is not a known setting (known: ${KEYS.join(', ')})`);
  return { listen: s.listen === undefined || s.listen === null ? null : parseListen(s.listen) };
}

const LISTEN_RULE = 'config: metrics.listen must be a port (loopback) or host:port with an IP address ([addr]:port for IPv6), port 0-65535';

function parseListen(v: unknown): { host: string; port: number } {
  const port = (p: string | number): number => {
    const n = typeof p === 'number' ? p : /^\d{1,5}$/.test(p) ? Number(p) : NaN;
    if (!Number.isInteger(n) || n < 0 || n > 65535) throw new Error(LISTEN_RULE);
    return n;
  };
  if (typeof v === 'number') return { host: '127.0.0.1', port: port(v) };
  if (typeof v !== 'string') throw new Error(LISTEN_RULE);
  if (/^\d+$/.test(v)) return { host: '127.0.0.1', port: port(v) };
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(v) ?? /^([^:]+):(\d+)$/.exec(v);
  // An address, not a name: which interface a name resolves to is not the operator's explicit choice.
  if (!m || net.isIP(m[1]) === 0) throw new Error(LISTEN_RULE);
  return { host: m[1], port: port(m[2]) };
}
