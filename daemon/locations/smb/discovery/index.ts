/**
 * SMB host discovery on the local network, bounded in time: on every IPv4
 * interface of this host (loopback excluded) at once,
 * - NetBIOS: a broadcast name query for '*', then a node status query to each
 *   responder for its server name and workgroup;
 * - mDNS: a query for `_smb._tcp.local` to 224.0.0.251;
 * - WS-Discovery: a Probe to 239.255.255.250.
 * Packets go only to the interfaces' broadcast address, those two multicast
 * groups, and (node status) to hosts that answered. Everything stops at the
 * deadline; what answered by then is the result.
 */
import dgram from 'node:dgram';
import os from 'node:os';
import { broadcastOf, nodeStatusQuery, parseNodeStatus, responseInfo, serverOf, wildcardQuery } from './netbios.js';
import { parseMessage, ptrQuery, smbHostsOf } from './mdns.js';
import { parseProbeMatches, probe, WSD_GROUP, WSD_PORT } from './wsd.js';
import type { DiscoveredHost, DiscoveryMethod, DiscoveryResult } from '../../driver.js';

interface Iface {
  name: string;
  address: string;
  broadcast: string;
}

/** IPv4 interfaces that can broadcast (loopback excluded). */
export function localInterfaces(): Iface[] {
  const out: Iface[] = [];
  for (const [name, addrs] of Object.entries(os.networkInterfaces())) {
    for (const a of addrs ?? []) {
      if (a.family !== 'IPv4' || a.internal) continue;
      out.push({ name, address: a.address, broadcast: broadcastOf(a.address, a.netmask) });
    }
  }
  return out;
}

class Found {
  private readonly byAddr = new Map<string, DiscoveredHost>();

  add(addr: string, via: DiscoveryMethod, info: { name?: string | null; workgroup?: string | null; fileServer?: boolean } = {}): void {
    let h = this.byAddr.get(addr);
    if (!h) {
      h = { name: null, addresses: [addr], workgroup: null, file_server: false, via: [] };
      this.byAddr.set(addr, h);
    }
    if (!h.via.includes(via)) h.via.push(via);
    // A NetBIOS name wins over an mDNS name: it is the one SMB clients use.
    if (info.name && (h.name === null || via === 'netbios')) h.name = info.name;
    if (info.workgroup) h.workgroup = info.workgroup;
    if (info.fileServer) h.file_server = true;
  }

  list(): DiscoveredHost[] {
    return [...this.byAddr.values()]
      .map((h) => ({ ...h, via: [...h.via].sort() }))
      .sort((a, b) => (a.name ?? '~').localeCompare(b.name ?? '~') || a.addresses[0].localeCompare(b.addresses[0]));
  }
}

function openSocket(iface: Iface, onMessage: (msg: Buffer, from: dgram.RemoteInfo) => void): Promise<dgram.Socket> {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket({ type: 'udp4', reuseAddr: false });
    s.once('error', reject);
    s.on('message', onMessage);
    s.bind(0, iface.address, () => {
      s.removeListener('error', reject);
      s.on('error', () => undefined); // late ICMP errors: nothing to do
      resolve(s);
    });
  });
}

const send = (s: dgram.Socket, buf: Buffer, port: number, addr: string) => new Promise<void>((resolve) => s.send(buf, port, addr, () => resolve()));

export class NetworkDiscovery {
  constructor(private readonly interfaces: () => Iface[] = localInterfaces) {}

  async hosts(timeoutMs: number): Promise<DiscoveryResult> {
    const ifaces = this.interfaces();
    const found = new Found();
    const methods: Record<DiscoveryMethod, string> = { netbios: '', mdns: '', wsd: '' };
    if (ifaces.length === 0) {
      const none = 'not sent: this host has no IPv4 interface besides loopback';
      return { hosts: [], methods: { netbios: none, mdns: none, wsd: none } };
    }
    const sockets: dgram.Socket[] = [];
    const timers: NodeJS.Timeout[] = [];
    const sent: Record<DiscoveryMethod, string[]> = { netbios: [], mdns: [], wsd: [] };
    const failed: Record<DiscoveryMethod, string[]> = { netbios: [], mdns: [], wsd: [] };
    const id = (Math.random() * 0xffff) | 0;
    const later = (ms: number, fn: () => void) => timers.push(setTimeout(fn, ms));
    try {
      await Promise.all(
        ifaces.map(async (iface) => {
          // NetBIOS
          try {
            const asked = new Set<string>();
            const s = await openSocket(iface, (msg, from) => {
              const info = responseInfo(msg);
              if (!info) return;
              if (info.type === 0x20) {
                found.add(from.address, 'netbios');
                if (!asked.has(from.address)) {
                  asked.add(from.address);
                  void send(s, nodeStatusQuery((id + 1) & 0xffff), 137, from.address);
                }
              } else if (info.type === 0x21) {
                const srv = serverOf(parseNodeStatus(msg));
                found.add(from.address, 'netbios', { name: srv.name, workgroup: srv.workgroup, fileServer: srv.fileServer });
              }
            });
            sockets.push(s);
            s.setBroadcast(true);
            const q = wildcardQuery(id);
            await send(s, q, 137, iface.broadcast);
            later(Math.min(250, timeoutMs / 4), () => void send(s, q, 137, iface.broadcast));
            sent.netbios.push(`${iface.name} (${iface.broadcast})`);
          } catch (err) {
            failed.netbios.push(`${iface.name}: ${(err as Error).message}`);
          }
          // mDNS
          try {
            const s = await openSocket(iface, (msg, from) => {
              for (const h of smbHostsOf(parseMessage(msg))) {
                const addrs = h.addresses.length ? h.addresses : [from.address];
                for (const a of addrs) found.add(a, 'mdns', { name: h.instance || h.host, fileServer: true });
              }
            });
            sockets.push(s);
            s.setMulticastInterface(iface.address);
            s.setMulticastTTL(1);
            await send(s, ptrQuery(0), 5353, '224.0.0.251');
            sent.mdns.push(iface.name);
          } catch (err) {
            failed.mdns.push(`${iface.name}: ${(err as Error).message}`);
          }
          // WS-Discovery
          try {
            const s = await openSocket(iface, (msg, from) => {
              const matches = parseProbeMatches(msg.toString('utf8'));
              if (matches.length) found.add(from.address, 'wsd', { fileServer: true });
            });
            sockets.push(s);
            s.setMulticastInterface(iface.address);
            s.setMulticastTTL(1);
            const p = probe();
            await send(s, p, WSD_PORT, WSD_GROUP);
            later(Math.min(300, timeoutMs / 4), () => void send(s, p, WSD_PORT, WSD_GROUP));
            sent.wsd.push(iface.name);
          } catch (err) {
            failed.wsd.push(`${iface.name}: ${(err as Error).message}`);
          }
        }),
      );
      await new Promise((r) => later(timeoutMs, () => r(undefined)));
    } finally {
      for (const t of timers) clearTimeout(t);
      for (const s of sockets) s.close();
    }
    for (const m of ['netbios', 'mdns', 'wsd'] as const) {
      const parts: string[] = [];
      if (sent[m].length) parts.push(`sent on ${sent[m].join(', ')}`);
      if (failed[m].length) parts.push(`failed on ${failed[m].join('; ')}`);
      methods[m] = parts.join('; ');
    }
    return { hosts: found.list(), methods };
  }
}
