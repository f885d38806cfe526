/**
 * mDNS (RFC 6762) for host discovery: one query for `_smb._tcp.local` PTR,
 * sent from an ephemeral port so that responders answer by unicast to it
 * (a "legacy unicast" query, RFC 6762 section 6.7). Pure encoder and parser.
 */

export const SMB_SERVICE = '_smb._tcp.local';

function encodeName(name: string): Buffer {
  const parts = name.split('.').filter(Boolean);
  return Buffer.concat([...parts.map((p) => Buffer.concat([Buffer.from([Buffer.byteLength(p)]), Buffer.from(p)])), Buffer.from([0])]);
}

/** A query for PTR records of `service`. */
export function ptrQuery(id: number, service = SMB_SERVICE): Buffer {
  const h = Buffer.alloc(12);
  h.writeUInt16BE(id, 0);
  h.writeUInt16BE(1, 4);
  return Buffer.concat([h, encodeName(service), Buffer.from([0x00, 0x0c, 0x00, 0x01])]);
}

/** Reads a possibly compressed name at `off`: the name and the offset after it in the record. */
export function readName(buf: Buffer, off: number): { name: string; next: number } {
  const labels: string[] = [];
  let next = -1;
  let hops = 0;
  while (off < buf.length && hops < 64) {
    const len = buf[off];
    if (len === 0) {
      if (next < 0) next = off + 1;
      break;
    }
    if ((len & 0xc0) === 0xc0) {
      if (off + 1 >= buf.length) break;
      if (next < 0) next = off + 2;
      off = ((len & 0x3f) << 8) | buf[off + 1];
      hops++;
      continue;
    }
    labels.push(buf.subarray(off + 1, off + 1 + len).toString('utf8'));
    off += 1 + len;
  }
  return { name: labels.join('.'), next: next < 0 ? buf.length : next };
}

export interface DnsRecord {
  name: string;
  type: number;
  /** PTR and SRV target, A address, TXT text. */
  data: string;
  port?: number;
}

/** Every answer, authority and additional record of a DNS message. */
export function parseMessage(buf: Buffer): DnsRecord[] {
  if (buf.length < 12) return [];
  const qd = buf.readUInt16BE(4);
  const rr = buf.readUInt16BE(6) + buf.readUInt16BE(8) + buf.readUInt16BE(10);
  let off = 12;
  for (let i = 0; i < qd && off < buf.length; i++) off = readName(buf, off).next + 4;
  const out: DnsRecord[] = [];
  for (let i = 0; i < rr && off + 10 <= buf.length; i++) {
    const { name, next } = readName(buf, off);
    off = next;
    if (off + 10 > buf.length) break;
    const type = buf.readUInt16BE(off);
    const len = buf.readUInt16BE(off + 8);
    const rdata = off + 10;
    off = rdata + len;
    if (off > buf.length) break;
    if (type === 12) out.push({ name, type, data: readName(buf, rdata).name });
    else if (type === 33 && len >= 7) out.push({ name, type, port: buf.readUInt16BE(rdata + 4), data: readName(buf, rdata + 6).name });
    else if (type === 1 && len === 4) out.push({ name, type, data: [...buf.subarray(rdata, rdata + 4)].join('.') });
  }
  return out;
}

/** The SMB hosts a response names: instance name, host name, port, IPv4 addresses. */
export function smbHostsOf(
  records: DnsRecord[],
  service = SMB_SERVICE,
): Array<{ instance: string; host: string | null; port: number | null; addresses: string[] }> {
  const lc = (s: string) => s.toLowerCase().replace(/\.$/, '');
  const instances = records.filter((r) => r.type === 12 && lc(r.name) === lc(service)).map((r) => r.data);
  return instances.map((inst) => {
    const srv = records.find((r) => r.type === 33 && lc(r.name) === lc(inst));
    const host = srv?.data ?? null;
    const addresses = host ? records.filter((r) => r.type === 1 && lc(r.name) === lc(host)).map((r) => r.data) : [];
    const label = inst.endsWith(`.${service}`) ? inst.slice(0, -(service.length + 1)) : inst;
    return { instance: label, host, port: srv?.port ?? null, addresses };
  });
}
