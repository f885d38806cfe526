/**
 * What an upstream address reaches from the proxy's host: the host itself
 * (loopback, the unspecified address, one of its own addresses) or
 * something else. Every textual form counts: IPv4-mapped and IPv4-compatible
 * IPv6 (`::ffff:127.0.0.1`, `::ffff:7f00:1`, `::127.0.0.1`), and the
 * numeric forms `inet_aton` accepts and a resolver may hand to the dialer
 * (`2130706433`, `0x7f000001`, `0177.0.0.1`, `127.1`), which are refused as
 * host names outright.
 */
import net from 'node:net';
import os from 'node:os';

export type AddressKind = 'loopback' | 'unspecified' | 'this-host' | 'other';

/** The 4 or 16 bytes of an IP address, or null when `s` is not one. */
export function ipBytes(s: string): number[] | null {
  if (net.isIPv4(s)) return s.split('.').map(Number);
  if (!net.isIPv6(s) || s.includes('%')) return null;
  let text = s;
  let tail: number[] = [];
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4) {
    tail = v4[1].split('.').map(Number);
    text = text.slice(0, -v4[1].length) + (text.endsWith(`:${v4[1]}`) ? '0:0' : '');
  }
  const [head, rest] = text.includes('::') ? text.split('::') : [text, null];
  const words = (p: string) => (p === '' ? [] : p.split(':').map((w) => parseInt(w, 16)));
  const h = words(head);
  const r = rest === null ? [] : words(rest);
  const fill = rest === null ? [] : new Array(8 - h.length - r.length).fill(0);
  const all = [...h, ...fill, ...r];
  if (all.length !== 8) return null;
  const bytes = all.flatMap((w) => [w >> 8, w & 0xff]);
  if (tail.length) bytes.splice(12, 4, ...tail);
  return bytes;
}

/** The IPv4 address an IPv6 address stands for (mapped, compatible, NAT64 well-known prefix), else null. */
export function embeddedV4(b: number[]): number[] | null {
  if (b.length !== 16) return null;
  const zeros = (from: number, to: number) => b.slice(from, to).every((x) => x === 0);
  if (zeros(0, 10) && b[10] === 0xff && b[11] === 0xff) return b.slice(12);
  // IPv4-compatible (::a.b.c.d, deprecated); `::` and `::1` are IPv6's own.
  if (zeros(0, 12) && !(b[12] === 0 && b[13] === 0 && b[14] === 0 && b[15] <= 1)) return b.slice(12);
  if (b[0] === 0x00 && b[1] === 0x64 && b[2] === 0xff && b[3] === 0x9b && zeros(4, 12)) return b.slice(12);
  return null;
}

/** One canonical text per address (IPv6 embedding an IPv4 address becomes that IPv4 address). */
export function canonicalIp(s: string): string | null {
  const b = ipBytes(s);
  if (!b) return null;
  const v4 = b.length === 4 ? b : embeddedV4(b);
  if (v4) return v4.join('.');
  const words: string[] = [];
  for (let i = 0; i < 16; i += 2) words.push(((b[i] << 8) | b[i + 1]).toString(16));
  return words.join(':');
}

/** The canonical addresses of this host's interfaces (in this network namespace). */
export function localAddresses(): Set<string> {
  const out = new Set<string>();
  for (const list of Object.values(os.networkInterfaces())) {
    for (const a of list ?? []) {
      const c = canonicalIp(a.address.split('%')[0]);
      if (c) out.add(c);
    }
  }
  return out;
}

/** What `ip` reaches from this host; `local` holds this host's own addresses (canonical). */
export function classifyIp(ip: string, local: Set<string>): AddressKind {
  const c = canonicalIp(ip);
  if (!c) return 'other';
  if (!c.includes(':')) {
    const first = Number(c.split('.')[0]);
    if (first === 127) return 'loopback';
    // Linux connects 0.0.0.0 (and 0/8) to the host itself.
    if (first === 0) return 'unspecified';
  } else {
    if (c === '0:0:0:0:0:0:0:1') return 'loopback';
    if (c === '0:0:0:0:0:0:0:0') return 'unspecified';
  }
  return local.has(c) ? 'this-host' : 'other';
}

/**
 * A host name that is really a number: a resolver's inet_aton reads
 * `2130706433`, `0x7f000001`, `0177.0.0.1` and `127.1` as IPv4 addresses,
 * and no real name has an all-numeric last label (RFC 3696).
 */
export function numericHostForm(host: string): boolean {
  if (net.isIPv4(host)) return false;
  const labels = host.split('.');
  const inetAton = labels.length <= 4 && labels.every((l) => /^(0x[0-9a-f]*|[0-9]+)$/i.test(l));
  return inetAton || /^[0-9]+$/.test(labels[labels.length - 1]);
}

/** `localhost` and names under it are loopback by definition (RFC 6761), whatever a resolver says. */
export const loopbackName = (host: string): boolean => /^localhost$|\.localhost$/i.test(host.replace(/\.$/, ''));
