/**
 * Outgoing cluster calls. One gRPC channel per member, opened on first use and
 * kept (HTTP/2 multiplexes every call to that member over it), closed when the
 * member leaves or its address or certificate changes.
 *
 * A channel authenticates with this node's certificate and accepts the server
 * only when its certificate chains to the cluster CA *and* has exactly the
 * fingerprint recorded for that member. Every call has a deadline.
 *
 * Control traffic (health, membership, directory, lease) is unary calls on
 * that channel; forwarded calls (the hot path) share one long-lived
 * `CallStream` on the same channel (cluster/call-stream.ts).
 */
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import { ClusterClientCtor, type Method } from './proto.js';
import type * as W from './proto.js';
import { CallStreamClient, type CallRequest } from './call-stream.js';
import type { Member } from './membership.js';
import { derToPem, fingerprint as certFingerprint, issuedBy, normalizeFingerprint } from '../certs/pki.js';

export interface ClientCredentialsPem {
  caCertPem: string;
  certPem: string;
  keyPem: string;
}

/** How often a member connection is pinged, and how long an unanswered ping may stay so. */
export const KEEPALIVE_TIME_MS = 2000;
export const KEEPALIVE_TIMEOUT_MS = 2000;

/** The TLS server name sent by members (certificates are checked by fingerprint, not by name). */
export const CLUSTER_SNI = 'hostd.cluster';

const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.ssl_target_name_override': CLUSTER_SNI,
  'grpc.default_authority': CLUSTER_SNI,
  // A member that comes back is found again within a second.
  'grpc.initial_reconnect_backoff_ms': 100,
  'grpc.min_reconnect_backoff_ms': 100,
  'grpc.max_reconnect_backoff_ms': 1000,
  // A hung member (stopped, or cut off without the connection closing) is
  // found by an HTTP/2 ping that goes unanswered: every KEEPALIVE_TIME_MS, and
  // the connection, with every call on it, fails KEEPALIVE_TIMEOUT_MS after an
  // unanswered one (docs/cluster.md, "A member that hangs").
  'grpc.keepalive_time_ms': KEEPALIVE_TIME_MS,
  'grpc.keepalive_timeout_ms': KEEPALIVE_TIMEOUT_MS,
  'grpc.keepalive_permit_without_calls': 1,
  'grpc.max_receive_message_length': 16 * 1024 * 1024,
  'grpc.enable_retries': 0,
  'grpc.enable_channelz': 0,
};

type AnyClient = grpc.Client &
  Record<Method, (req: unknown, meta: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: any) => void) => void> & {
    CallStream(meta: grpc.Metadata, opts?: grpc.CallOptions): grpc.ClientDuplexStream<W.CallBatch, W.ReplyBatch>;
  };

interface Entry {
  key: string;
  /** The member record the entry was made for (a lookup with the same record skips building the key). */
  member: Member;
  generation: number;
  client: AnyClient;
  calls: CallStreamClient;
}

export class PeerClients {
  private readonly clients = new Map<string, Entry>();
  private generation = 0;

  constructor(private readonly creds: () => ClientCredentialsPem | null) {}

  /** Forget every channel (this node's certificate changed). */
  reset(): void {
    this.generation++;
    for (const c of this.clients.values()) close(c);
    this.clients.clear();
  }

  drop(peerId: string): void {
    const c = this.clients.get(peerId);
    if (c) {
      close(c);
      this.clients.delete(peerId);
    }
  }

  private entry(member: Member): Entry {
    const cur = this.clients.get(member.peer_id);
    // The membership hands out the same record until the member changes: the common case of every forwarded call.
    if (cur && cur.member === member && cur.generation === this.generation) return cur;
    const key = `${member.address}|${member.fingerprint}|${this.generation}`;
    if (cur && cur.key === key) {
      cur.member = member;
      return cur;
    }
    if (cur) close(cur);
    const c = this.creds();
    if (!c) throw new Error('this node is not in a cluster');
    const checkServerIdentity = (_host: string, cert: tls.PeerCertificate): Error | undefined => {
      const fp = normalizeFingerprint(cert.fingerprint256 ?? '');
      return fp === member.fingerprint
        ? undefined
        : new Error(`the server at ${member.address} is not member '${member.name}' (${member.peer_id}): certificate fingerprint ${fp.slice(0, 16)}...`);
    };
    const creds = grpc.credentials.createSsl(Buffer.from(c.caCertPem), Buffer.from(c.keyPem), Buffer.from(c.certPem), { checkServerIdentity });
    const client = new ClusterClientCtor(member.address, creds, CHANNEL_OPTIONS) as unknown as AnyClient;
    const calls = new CallStreamClient(() => client.CallStream(new grpc.Metadata()));
    const e = { key, member, generation: this.generation, client, calls };
    this.clients.set(member.peer_id, e);
    return e;
  }

  private client(member: Member): AnyClient {
    return this.entry(member).client;
  }

  /**
   * The forwarding hot path: one call on the member's shared CallStream
   * (cluster/call-stream.ts). Rejects with a {code, details} error like `unary`.
   */
  call(member: Member, req: CallRequest, deadlineMs: number): Promise<W.CallOutcome> {
    let e: Entry;
    try {
      e = this.entry(member);
    } catch (err) {
      return Promise.reject(err);
    }
    return e.calls.call(req, deadlineMs);
  }

  /**
   * A forwarded event stream: resolves once the member says it is open (its
   * first, empty message), with a function that closes it; each later
   * message goes to `onMessage` (a promise it answers pauses the stream until
   * it resolves), and `onEnd` is called once when the stream
   * ends. Rejects with the grpc ServiceError of a refusal (its hostd status
   * in the `hostd-status` metadata) or of an unreachable member.
   */
  eventStream(member: Member, req: W.EventStreamRequest, onMessage: (m: W.EventMessage) => void | Promise<void>, onEnd: () => void): Promise<() => void> {
    let client: AnyClient;
    try {
      client = this.client(member);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise((resolve, reject) => {
      const call = (client as unknown as { EventStream(req: unknown, md: grpc.Metadata): grpc.ClientReadableStream<W.EventMessage> }).EventStream(
        req,
        new grpc.Metadata(),
      );
      let open = false;
      let ended = false;
      // onEnd is for a stream that opened; a refusal is the rejection alone.
      const end = () => {
        if (ended || !open) return;
        ended = true;
        onEnd();
      };
      call.on('data', (m: W.EventMessage) => {
        if (!open) {
          open = true;
          resolve(() => call.cancel());
          return;
        }
        // A reader that cannot take more: the member's stream waits (HTTP/2 flow control), nothing piles up here.
        const wait = onMessage(m);
        if (wait) {
          call.pause();
          void wait.then(() => call.resume());
        }
      });
      call.on('error', (err) => {
        if (!open) reject(err);
        end();
      });
      const closed = () => {
        if (!open)
          reject(Object.assign(new Error('the member ended the stream before opening it'), { details: 'the member ended the stream before opening it' }));
        end();
      };
      call.on('end', closed);
      call.on('close', closed);
    });
  }

  /** One unary call to a member, with a deadline in milliseconds. Rejects with the grpc ServiceError. */
  unary<Res>(member: Member, method: Method, req: unknown, deadlineMs: number): Promise<Res> {
    let client: AnyClient;
    try {
      client = this.client(member);
    } catch (err) {
      return Promise.reject(err);
    }
    return new Promise<Res>((resolve, reject) => {
      client[method](req, new grpc.Metadata(), { deadline: Date.now() + deadlineMs }, (err, res) => (err ? reject(err) : resolve(res as Res)));
    });
  }

  close(): void {
    for (const c of this.clients.values()) close(c);
    this.clients.clear();
  }
}

function close(entry: Entry): void {
  entry.calls.close();
  entry.client.close();
}

/**
 * A one-off call for a node that has no certificate yet (Join): the server must
 * chain to the pinned CA certificate; no client certificate is sent.
 */
export function joinCall<Res>(address: string, caCertPem: string, method: Method, req: unknown, deadlineMs: number): Promise<Res> {
  const creds = grpc.credentials.createSsl(Buffer.from(caCertPem), null, null, { checkServerIdentity: () => undefined });
  const client = new ClusterClientCtor(address, creds, { ...CHANNEL_OPTIONS }) as unknown as AnyClient;
  return new Promise<Res>((resolve, reject) => {
    client[method](req, new grpc.Metadata(), { deadline: Date.now() + deadlineMs }, (err, res) => {
      client.close();
      if (err) reject(err);
      else resolve(res as Res);
    });
  });
}

/**
 * Fetches the cluster CA certificate from a member without trusting anything
 * but the fingerprint pinned in the join token: the member's TLS chain
 * carries the CA; it must hash to the pin and must have signed the member's
 * certificate.
 */
export function fetchPinnedCa(address: string, pin: string, timeoutMs = 5000): Promise<string> {
  const m = /^\[?([^\]]*?)\]?:(\d{1,5})$/.exec(address.trim());
  if (!m) return Promise.reject(new Error(`address must look like host:port, got '${address}'`));
  const [, host, port] = m;
  return new Promise<string>((resolve, reject) => {
    const sock = tls.connect({ host, port: Number(port), servername: CLUSTER_SNI, rejectUnauthorized: false, ALPNProtocols: ['h2'] });
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error(`no TLS answer from ${address} within ${timeoutMs} ms`));
    }, timeoutMs);
    sock.once('error', (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot reach ${address}: ${err.message}`));
    });
    sock.once('secureConnect', () => {
      clearTimeout(timer);
      try {
        const leaf = sock.getPeerCertificate(true);
        let found: Buffer | undefined;
        const seen = new Set<string>();
        for (let c: tls.DetailedPeerCertificate | undefined = leaf; c && c.raw && !seen.has(c.fingerprint256); c = c.issuerCertificate) {
          seen.add(c.fingerprint256);
          if (certFingerprint(c.raw) === pin) found = c.raw;
        }
        sock.destroy();
        if (!found) throw new Error(`the server at ${address} does not present the cluster CA named by the join token (fingerprint ${pin.slice(0, 16)}...)`);
        const caPem = derToPem(found);
        if (!leaf.raw || !issuedBy(leaf.raw, caPem)) throw new Error(`the server at ${address} presents a certificate not signed by the pinned cluster CA`);
        resolve(caPem);
      } catch (err) {
        reject(err);
      }
    });
  });
}

/** Is this grpc error the member being down or slow (as opposed to answering)? */
export function grpcCode(err: unknown): number | undefined {
  const c = (err as grpc.ServiceError)?.code;
  return typeof c === 'number' ? c : undefined;
}

export { grpc };
