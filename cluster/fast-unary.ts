/**
 * A lean gRPC unary client over node:http2 for the forwarding hot path
 * (`Call`). It speaks the gRPC wire protocol (HTTP/2 POST, length-prefixed
 * protobuf message, grpc-status trailers, grpc-timeout) to the same grpc-js
 * server as every other RPC, over the same mutual TLS, but skips grpc-js's
 * client stack (resolver, load balancer, interceptors, retry machinery), which
 * costs about twice the CPU per call of HTTP/2 itself. One HTTP/2 session per
 * member, reused by every call; a session that closes or fails is replaced on
 * the next call.
 *
 * Errors are shaped like grpc-js ServiceErrors ({code, details}), so callers
 * treat both clients alike.
 */
import http2 from 'node:http2';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';

export interface FastTarget {
  address: string;
  caCertPem: string;
  certPem: string;
  keyPem: string;
  servername: string;
  checkServerIdentity: (host: string, cert: tls.PeerCertificate) => Error | undefined;
}

export class RpcFailure extends Error {
  constructor(readonly code: grpc.status, readonly details: string) {
    super(`${grpc.status[code]}: ${details}`);
  }
}

const { NGHTTP2_CANCEL } = http2.constants;

export class FastUnaryClient {
  private session: http2.ClientHttp2Session | null = null;
  private closed = false;

  constructor(private readonly t: FastTarget) {}

  private connect(): http2.ClientHttp2Session {
    const cur = this.session;
    if (cur && !cur.closed && !cur.destroyed) return cur;
    const m = /^\[?([^\]]*?)\]?:(\d{1,5})$/.exec(this.t.address);
    if (!m) throw new RpcFailure(grpc.status.UNAVAILABLE, `bad address '${this.t.address}'`);
    const [, host, port] = m;
    const s = http2.connect(`https://${this.t.address}`, {
      createConnection: () => {
        const sock = tls.connect({
          host,
          port: Number(port),
          servername: this.t.servername,
          ca: this.t.caCertPem,
          cert: this.t.certPem,
          key: this.t.keyPem,
          ALPNProtocols: ['h2'],
          checkServerIdentity: this.t.checkServerIdentity,
        });
        sock.setNoDelay(true);
        return sock;
      },
    });
    s.on('error', () => undefined); // surfaced through the streams
    s.once('close', () => {
      if (this.session === s) this.session = null;
    });
    s.once('goaway', () => {
      if (this.session === s) this.session = null;
    });
    s.unref();
    this.session = s;
    return s;
  }

  /** One unary call: `path` like /hostd.cluster.v1.Cluster/Call, `message` the serialised request. */
  call(path: string, message: Buffer, deadlineMs: number): Promise<Buffer> {
    if (this.closed) return Promise.reject(new RpcFailure(grpc.status.CANCELLED, 'client closed'));
    return new Promise<Buffer>((resolve, reject) => {
      let session: http2.ClientHttp2Session;
      try {
        session = this.connect();
      } catch (err) {
        reject(err instanceof RpcFailure ? err : new RpcFailure(grpc.status.UNAVAILABLE, (err as Error).message));
        return;
      }
      let done = false;
      const finish = (err: RpcFailure | null, body?: Buffer) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve(body!);
      };
      const frame = Buffer.allocUnsafe(5 + message.length);
      frame[0] = 0;
      frame.writeUInt32BE(message.length, 1);
      message.copy(frame, 5);
      let stream: http2.ClientHttp2Stream;
      try {
        stream = session.request({
          ':method': 'POST',
          ':path': path,
          'content-type': 'application/grpc',
          te: 'trailers',
          'grpc-timeout': `${Math.max(1, Math.ceil(deadlineMs))}m`,
        });
      } catch (err) {
        this.session = null;
        session.destroy();
        reject(new RpcFailure(grpc.status.UNAVAILABLE, (err as Error).message));
        return;
      }
      const timer = setTimeout(() => {
        stream.close(NGHTTP2_CANCEL);
        finish(new RpcFailure(grpc.status.DEADLINE_EXCEEDED, `deadline of ${deadlineMs} ms exceeded`));
      }, deadlineMs);
      const chunks: Buffer[] = [];
      let status: number | undefined;
      let details = '';
      const takeStatus = (h: http2.IncomingHttpHeaders) => {
        const st = h['grpc-status'];
        if (st !== undefined) {
          status = Number(st);
          const msg = h['grpc-message'];
          details = typeof msg === 'string' ? safeDecode(msg) : '';
        }
      };
      stream.on('response', (h) => {
        const code = Number(h[':status']);
        if (code !== 200) {
          stream.close(NGHTTP2_CANCEL);
          finish(new RpcFailure(grpc.status.UNKNOWN, `HTTP ${code} from ${this.t.address}`));
          return;
        }
        takeStatus(h); // a trailers-only answer carries its status here
      });
      stream.on('trailers', takeStatus);
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', (err) => finish(new RpcFailure(grpc.status.UNAVAILABLE, connectError(err))));
      stream.on('close', () => {
        if (done) return;
        if (status === undefined) {
          finish(new RpcFailure(grpc.status.UNAVAILABLE, `connection to ${this.t.address} closed without an answer`));
          return;
        }
        if (status !== grpc.status.OK) {
          finish(new RpcFailure(status, details));
          return;
        }
        const body = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
        if (body.length < 5 || body[0] !== 0 || body.readUInt32BE(1) !== body.length - 5) {
          finish(new RpcFailure(grpc.status.INTERNAL, 'malformed or compressed response message'));
          return;
        }
        finish(null, body.subarray(5));
      });
      stream.end(frame);
    });
  }

  close(): void {
    this.closed = true;
    this.session?.close();
    this.session = null;
  }
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function connectError(err: Error & { code?: string; cause?: Error }): string {
  return (err.cause?.message ?? err.message).replace(/^Error: /, '');
}
