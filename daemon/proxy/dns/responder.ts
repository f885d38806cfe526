/**
 * The built-in DNS responder: names under the configured base domains get
 * the proxy's address (authoritative, short TTL, since the address can move
 * on failover); every other query is forwarded unchanged to the configured
 * upstream resolvers and their answer relayed. Packets are decoded and
 * encoded by dns-packet; this file only decides what to answer.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import dnsPacket from 'dns-packet';
import type { DnsServer, DnsStats, ResponderHooks } from '../driver.js';
import { hostPort, type HostPort } from '../host-port.js';

export const ZONE_TTL = 30;
const FORWARD_TIMEOUT_MS = 2000;
const RCODE_SERVFAIL = 2;

export class DnsResponder implements DnsServer {
  private udp: dgram.Socket | null = null;
  private tcp: net.Server | null = null;
  private readonly counts: DnsStats = { answered: 0, forwarded: 0, failed: 0 };
  lastError: string | null = null;

  constructor(
    readonly listen: HostPort,
    private readonly hooks: ResponderHooks,
  ) {}

  private get host(): string {
    return this.listen.host;
  }

  private get port(): number {
    return this.listen.port;
  }

  stats(): DnsStats {
    return { ...this.counts };
  }

  async start(): Promise<void> {
    const type = net.isIPv6(this.host) ? 'udp6' : 'udp4';
    const udp = dgram.createSocket({ type, reuseAddr: false });
    await new Promise<void>((resolve, reject) => {
      udp.once('error', reject);
      udp.bind(this.port, this.host, () => {
        udp.off('error', reject);
        resolve();
      });
    });
    udp.on('error', (err) => (this.lastError = err.message));
    udp.on('message', (msg, rinfo) => {
      void this.answer(msg).then((out) => {
        if (out) udp.send(out, rinfo.port, rinfo.address);
      });
    });
    this.udp = udp;
    const tcp = net.createServer((sock) => this.serveTcp(sock));
    try {
      await new Promise<void>((resolve, reject) => {
        tcp.once('error', reject);
        tcp.listen(this.port, this.host, () => {
          tcp.off('error', reject);
          resolve();
        });
      });
    } catch (err) {
      udp.close();
      this.udp = null;
      throw err;
    }
    this.tcp = tcp;
  }

  async stop(): Promise<void> {
    this.udp?.close();
    this.udp = null;
    const tcp = this.tcp;
    this.tcp = null;
    if (tcp) await new Promise<void>((r) => tcp.close(() => r()));
  }

  running(): boolean {
    return this.udp !== null;
  }

  private serveTcp(sock: net.Socket): void {
    let buf = Buffer.alloc(0);
    sock.setTimeout(10_000, () => sock.destroy());
    sock.on('error', () => undefined);
    sock.on('data', (chunk) => {
      buf = Buffer.concat([buf, chunk]);
      while (buf.length >= 2) {
        const len = buf.readUInt16BE(0);
        if (buf.length < 2 + len) break;
        const msg = buf.subarray(2, 2 + len);
        buf = buf.subarray(2 + len);
        void this.answer(msg).then((out) => {
          if (!out || sock.destroyed) return;
          const head = Buffer.alloc(2);
          head.writeUInt16BE(out.length);
          sock.write(Buffer.concat([head, out]));
        });
      }
    });
  }

  /** The reply to one query packet, or null to drop it (unparseable). */
  async answer(msg: Buffer): Promise<Buffer | null> {
    let q: dnsPacket.DecodedPacket;
    try {
      q = dnsPacket.decode(msg);
    } catch {
      return null;
    }
    if (q.type !== 'query' || !q.questions?.length) return null;
    const question = q.questions[0];
    const z = this.hooks.zone(question.name.toLowerCase().replace(/\.$/, ''));
    if (z.inZone) {
      this.counts.answered++;
      const answers: dnsPacket.Answer[] = [];
      if (question.type === 'A') for (const a of z.a) answers.push({ type: 'A', name: question.name, ttl: ZONE_TTL, class: 'IN', data: a });
      if (question.type === 'AAAA') for (const a of z.aaaa) answers.push({ type: 'AAAA', name: question.name, ttl: ZONE_TTL, class: 'IN', data: a });
      return dnsPacket.encode({
        type: 'response',
        id: q.id,
        flags: dnsPacket.AUTHORITATIVE_ANSWER | (q.flag_rd ? dnsPacket.RECURSION_DESIRED : 0),
        questions: q.questions,
        answers,
      });
    }
    for (const u of this.hooks.upstreams()) {
      try {
        const out = await forwardUdp(msg, u.host, u.port);
        this.counts.forwarded++;
        return out;
      } catch (err) {
        this.lastError = `upstream ${hostPort(u.host, u.port)}: ${(err as Error).message}`;
      }
    }
    this.counts.failed++;
    return dnsPacket.encode({ type: 'response', id: q.id, flags: RCODE_SERVFAIL | (q.flag_rd ? dnsPacket.RECURSION_DESIRED : 0), questions: q.questions });
  }
}

function forwardUdp(msg: Buffer, host: string, port: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const s = dgram.createSocket(net.isIPv6(host) ? 'udp6' : 'udp4');
    const id = msg.readUInt16BE(0);
    const timer = setTimeout(() => {
      s.close();
      reject(new Error(`no answer within ${FORWARD_TIMEOUT_MS} ms`));
    }, FORWARD_TIMEOUT_MS);
    s.on('error', (err) => {
      clearTimeout(timer);
      s.close();
      reject(err);
    });
    s.on('message', (reply, rinfo) => {
      if (rinfo.address !== host || reply.length < 2 || reply.readUInt16BE(0) !== id) return;
      clearTimeout(timer);
      s.close();
      resolve(reply);
    });
    s.send(msg, port, host);
  });
}
