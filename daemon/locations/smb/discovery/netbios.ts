/**
 * NetBIOS name service (RFC 1002) packets for host discovery: a broadcast
 * name query for the wildcard name '*' that every NetBIOS node answers, then
 * a node status query to each responder for its names (the <20> name is its
 * file server, the <00> group its workgroup). Pure encoders and parsers.
 */

/** First-level encoding of a 16-byte NetBIOS name (each nibble as 'A'+n). */
export function encodeName(name: string, suffix: number, pad = 0x20): Buffer {
  const raw = Buffer.alloc(16, pad);
  raw.write(name.slice(0, 15), 0, 'latin1');
  raw[15] = suffix;
  if (name === '*') raw.fill(0, 1); // the wildcard is '*' followed by NULs
  const out = Buffer.alloc(34);
  out[0] = 32;
  for (let i = 0; i < 16; i++) {
    out[1 + i * 2] = 0x41 + (raw[i] >> 4);
    out[2 + i * 2] = 0x41 + (raw[i] & 0x0f);
  }
  out[33] = 0;
  return out;
}

function header(id: number, flags: number): Buffer {
  const h = Buffer.alloc(12);
  h.writeUInt16BE(id, 0);
  h.writeUInt16BE(flags, 2);
  h.writeUInt16BE(1, 4); // one question
  return h;
}

/** A broadcast name query for '*' (type NB). */
export function wildcardQuery(id: number): Buffer {
  return Buffer.concat([header(id, 0x0110), encodeName('*', 0), Buffer.from([0x00, 0x20, 0x00, 0x01])]);
}

/** A node status request (type NBSTAT) for '*'. */
export function nodeStatusQuery(id: number): Buffer {
  return Buffer.concat([header(id, 0x0000), encodeName('*', 0), Buffer.from([0x00, 0x21, 0x00, 0x01])]);
}

/** Skips a (possibly compressed) name starting at `off`; returns the offset after it. */
function skipName(buf: Buffer, off: number): number {
  while (off < buf.length) {
    const len = buf[off];
    if (len === 0) return off + 1;
    if ((len & 0xc0) === 0xc0) return off + 2;
    off += 1 + len;
  }
  return off;
}

export interface NodeName {
  name: string;
  suffix: number;
  group: boolean;
}

/** The transaction id and type of a response, or null when it is not one. */
export function responseInfo(buf: Buffer): { id: number; type: number } | null {
  if (buf.length < 12) return null;
  const flags = buf.readUInt16BE(2);
  if (!(flags & 0x8000)) return null; // not a response
  if ((flags & 0x000f) !== 0) return null; // an error rcode
  const an = buf.readUInt16BE(6);
  if (an < 1) return null;
  const off = skipName(buf, 12);
  if (off + 10 > buf.length) return null;
  return { id: buf.readUInt16BE(0), type: buf.readUInt16BE(off) };
}

/** The names of a node status response. */
export function parseNodeStatus(buf: Buffer): NodeName[] {
  const info = responseInfo(buf);
  if (!info || info.type !== 0x21) return [];
  let off = skipName(buf, 12) + 10; // type, class, ttl, rdlength
  if (off >= buf.length) return [];
  const count = buf[off];
  off += 1;
  const names: NodeName[] = [];
  for (let i = 0; i < count && off + 18 <= buf.length; i++, off += 18) {
    const name = buf
      .subarray(off, off + 15)
      .toString('latin1')
      .replace(/[\s\0]+$/, '');
    const suffix = buf[off + 15];
    const flags = buf.readUInt16BE(off + 16);
    names.push({ name, suffix, group: (flags & 0x8000) !== 0 });
  }
  return names;
}

/** The server name (<20>, else <00> unique) and workgroup (<00> group) of a node's names. */
export function serverOf(names: NodeName[]): { name: string | null; workgroup: string | null; fileServer: boolean } {
  const server = names.find((n) => n.suffix === 0x20 && !n.group);
  const unique = names.find((n) => n.suffix === 0x00 && !n.group);
  const wg = names.find((n) => n.suffix === 0x00 && n.group);
  return { name: (server ?? unique)?.name ?? null, workgroup: wg?.name ?? null, fileServer: server !== undefined };
}

/** IPv4 broadcast address of an interface address and netmask. */
export function broadcastOf(address: string, netmask: string): string {
  const a = address.split('.').map(Number);
  const m = netmask.split('.').map(Number);
  return a.map((x, i) => (x & m[i]) | (~m[i] & 0xff)).join('.');
}
