/**
 * The cluster listener: a TLS server we own, feeding a grpc-js server through
 * its connection injector.
 *
 * Owning the TLS layer lets one port serve both kinds of client:
 * - a member, whose client certificate must be signed by the cluster CA and
 *   have the fingerprint of a current member: anything else that presents a
 *   certificate (another CA, a removed member) is disconnected as soon as the
 *   TLS handshake ends, before a single RPC is read;
 * - a joining node, which has no certificate yet: its connection goes to a
 *   second gRPC server that serves only Join (every other RPC answers
 *   UNAUTHENTICATED) and reads messages of at most 64 KiB, where members may
 *   send 16 MiB. At most a few such connections are open at once, each for at
 *   most 30 seconds; what Join does with its request is in join-guard.ts.
 * Removing a member destroys its open connections at once. The forwarding
 * stream (CallStream) is checked when it opens and again on every batch it
 * reads (cluster/call-stream.ts).
 */
import type net from 'node:net';
import tls from 'node:tls';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from 'pino';
import { ClusterService } from './proto.js';
import type * as W from './proto.js';
import { serveCallStream } from './call-stream.js';
import type { Member } from './membership.js';
import { normalizeFingerprint } from '../certs/pki.js';
import { ApiError, errorBody } from '../daemon/lib/errors.js';
import { RefusalThrottle, SHARED_KEY, type TraceLimits } from '../daemon/lib/throttle.js';
import { JOIN_MESSAGE_MAX } from './join-guard.js';

export class RpcError extends Error {
  constructor(
    readonly code: grpc.status,
    message: string,
  ) {
    super(message);
  }
}

export interface ServerCredentialsPem {
  caCertPem: string;
  certPem: string;
  keyPem: string;
}

export interface ClusterHandlers {
  /** One forwarded call (a frame of a CallStream) from member `peer`. */
  rpcCall(req: W.CallFrame, peer: Member): Promise<W.CallOutcome>;
  rpcHealth(req: W.HealthRequest, peer: Member): Promise<W.HealthReply>;
  rpcJoin(req: W.JoinRequest, remote: string): Promise<W.JoinReply>;
  rpcMembership(req: W.MembershipUpdate, peer: Member): Promise<W.Ack>;
  rpcTokenDirectory(req: W.DirectorySnapshot, peer: Member): Promise<W.Ack>;
  rpcTokenDirectoryGet(peer: Member): Promise<W.DirectorySnapshot>;
  rpcLease(msg: unknown, peer: Member): Promise<unknown>;
  rpcProxyConfig(msg: unknown, peer: Member): Promise<unknown>;
  /** A forwarded event stream from member `peer`: answers a function that closes it, or throws the refusal (an ApiError). */
  rpcEventStream(req: W.EventStreamRequest, peer: Member, sink: EventSinkLike): Promise<() => void>;
}

/** Where a forwarded event stream writes (daemon/events/subscription.ts Sink). */
export interface EventSinkLike {
  send(text: string, id: string): boolean;
  drained(): Promise<void>;
  end(): void;
}

type Unary = (call: grpc.ServerUnaryCall<any, any>, cb: grpc.sendUnaryData<any>) => void;

/** Connections without a client certificate open at once; more are closed after the handshake. */
export const ANONYMOUS_CONNECTIONS_MAX = 16;
/** How long a connection without a client certificate may stay open (a join takes well under this). */
export const ANONYMOUS_CONNECTION_MS = 30_000;
/** Refused connections logged one by one; the rest are counted in a summary line once a minute. */
const CONNECTION_TRACE: TraceLimits = { burst: 10, everyMs: 6000, windowMs: 60_000, maxKeys: 1 };

export class ClusterServer {
  private readonly tlsServer: tls.Server;
  private readonly grpcServer: grpc.Server;
  private readonly injector: ReturnType<grpc.Server['createConnectionInjector']>;
  /** The server for connections without a certificate: Join only, small messages. */
  private readonly joinServer: grpc.Server;
  private readonly joinInjector: ReturnType<grpc.Server['createConnectionInjector']>;
  private readonly anonymous = new Set<tls.TLSSocket>();
  private readonly refusedTrace: RefusalThrottle<null>;
  private hasCreds = false;
  /** Open member connections by certificate fingerprint. */
  private readonly byFp = new Map<string, Set<tls.TLSSocket>>();
  private readonly rawSockets = new Set<net.Socket>();
  /**
   * Certificate fingerprint of each open member connection by its remote
   * "address:port" (what grpc-js's call.getPeer() gives): computed once per
   * connection, because asking TLS for the peer certificate on every call is
   * the most expensive step of a forwarded call.
   */
  private readonly fpByPeer = new Map<string, string>();

  constructor(
    private readonly handlers: ClusterHandlers,
    private readonly memberByFingerprint: (fp: string) => Member | undefined,
    private readonly log: Logger,
  ) {
    this.tlsServer = tls.createServer({
      requestCert: true,
      // Verified by hand in onSecure: a joiner has no certificate yet.
      rejectUnauthorized: false,
      ALPNProtocols: ['h2'],
      minVersion: 'TLSv1.2',
    });
    this.tlsServer.on('connection', (s: net.Socket) => {
      if (!this.hasCreds) {
        s.destroy();
        return;
      }
      s.setNoDelay(true);
      this.rawSockets.add(s);
      s.once('close', () => this.rawSockets.delete(s));
    });
    this.tlsServer.on('secureConnection', (s) => this.onSecure(s));
    this.tlsServer.on('tlsClientError', (err) => this.log.debug({ err: String(err.message).slice(0, 200) }, 'cluster TLS handshake failed'));
    this.grpcServer = new grpc.Server({ 'grpc.max_receive_message_length': 16 * 1024 * 1024, 'grpc.enable_channelz': 0 });
    this.grpcServer.addService(ClusterService, this.implementation());
    this.injector = this.grpcServer.createConnectionInjector(grpc.ServerCredentials.createInsecure());
    this.joinServer = new grpc.Server({ 'grpc.max_receive_message_length': JOIN_MESSAGE_MAX, 'grpc.enable_channelz': 0 });
    this.joinServer.addService(ClusterService, this.joinImplementation());
    this.joinInjector = this.joinServer.createConnectionInjector(grpc.ServerCredentials.createInsecure());
    this.refusedTrace = new RefusalThrottle<null>(CONNECTION_TRACE, (s) => {
      this.log.warn(
        { refused: s.count, since: s.since, until: s.until, reasons: s.details },
        'cluster connections refused (summary of refusals not logged one by one)',
      );
    });
  }

  /** Logs a refused connection, at a bounded rate (the rest are counted). */
  private refuse(socket: tls.TLSSocket, reason: string, fields: Record<string, unknown> = {}): void {
    const remote = socket.remoteAddress ?? 'unknown';
    if (this.refusedTrace.admit(SHARED_KEY, reason, null)) this.log.warn({ remote, ...fields }, `cluster connection refused: ${reason}`);
    socket.destroy();
  }

  async listen(host: string, port: number): Promise<{ host: string; port: number }> {
    await new Promise<void>((resolve, reject) => {
      this.tlsServer.once('error', reject);
      this.tlsServer.listen(port, host, () => {
        this.tlsServer.off('error', reject);
        resolve();
      });
    });
    const a = this.tlsServer.address() as net.AddressInfo;
    return { host: a.address, port: a.port };
  }

  /** Installs (or, with null, withdraws) the node's certificate and the CA it trusts. */
  setCredentials(creds: ServerCredentialsPem | null): void {
    if (!creds) {
      this.hasCreds = false;
      for (const s of this.rawSockets) s.destroy();
      return;
    }
    // The CA goes after the node certificate so that a joiner can pin it by fingerprint.
    this.tlsServer.setSecureContext({ ca: creds.caCertPem, cert: creds.certPem + '\n' + creds.caCertPem, key: creds.keyPem });
    this.hasCreds = true;
  }

  /** Disconnects every open connection made with this certificate (a removed member). */
  dropFingerprint(fp: string): void {
    const set = this.byFp.get(fp);
    if (!set) return;
    for (const s of set) s.destroy();
    this.byFp.delete(fp);
  }

  private onSecure(socket: tls.TLSSocket): void {
    if (socket.alpnProtocol !== 'h2') {
      socket.destroy();
      return;
    }
    const cert = socket.getPeerCertificate();
    const presented = cert && Object.keys(cert).length > 0;
    if (!presented) {
      this.onAnonymous(socket);
      return;
    }
    if (!socket.authorized) {
      this.refuse(socket, 'certificate not signed by the cluster CA', { reason: String(socket.authorizationError).slice(0, 100) });
      return;
    }
    const fp = normalizeFingerprint(cert.fingerprint256);
    if (!this.memberByFingerprint(fp)) {
      this.refuse(socket, 'certificate is not that of a current member', { cn: String(cert.subject?.CN ?? '').slice(0, 64) });
      return;
    }
    let set = this.byFp.get(fp);
    if (!set) this.byFp.set(fp, (set = new Set()));
    set.add(socket);
    const key = `${socket.remoteAddress}:${socket.remotePort}`;
    this.fpByPeer.set(key, fp);
    socket.once('close', () => {
      set!.delete(socket);
      if (this.fpByPeer.get(key) === fp) this.fpByPeer.delete(key);
    });
    socket.on('error', () => undefined);
    this.injector.injectConnection(socket);
  }

  /** A connection without a certificate: a joining node, or anyone who can reach the port. */
  private onAnonymous(socket: tls.TLSSocket): void {
    if (this.anonymous.size >= ANONYMOUS_CONNECTIONS_MAX) {
      this.refuse(socket, 'too many connections without a certificate');
      return;
    }
    this.anonymous.add(socket);
    const timer = setTimeout(() => socket.destroy(), ANONYMOUS_CONNECTION_MS);
    timer.unref();
    socket.once('close', () => {
      clearTimeout(timer);
      this.anonymous.delete(socket);
    });
    socket.on('error', () => undefined);
    this.joinInjector.injectConnection(socket);
  }

  /** The fingerprint of a call's client certificate, or undefined (no certificate). */
  private fingerprintOf(call: Pick<grpc.ServerUnaryCall<unknown, unknown>, 'getPeer' | 'getAuthContext'>): string | undefined {
    const known = this.fpByPeer.get(call.getPeer());
    if (known) return known;
    const cert = call.getAuthContext?.()?.sslPeerCertificate;
    return cert?.fingerprint256 ? normalizeFingerprint(cert.fingerprint256) : undefined;
  }

  /** The member behind a call's client certificate, or undefined. */
  private identify(call: grpc.ServerUnaryCall<unknown, unknown>): Member | undefined {
    const fp = this.fingerprintOf(call);
    // Looked up again on every call: a member removed a moment ago is refused at once.
    return fp ? this.memberByFingerprint(fp) : undefined;
  }

  /** A CallStream: its member is identified once here, then re-checked on every batch. */
  private callStream(call: grpc.ServerDuplexStream<W.CallBatch, W.ReplyBatch>): void {
    const fp = this.fingerprintOf(call);
    const opened = fp ? this.memberByFingerprint(fp) : undefined;
    if (!fp || !opened) {
      call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: 'a client certificate of a current cluster member is required' });
      return;
    }
    serveCallStream(call, opened, {
      current: () => this.memberByFingerprint(fp),
      run: (frame, peer) => this.handlers.rpcCall(frame, peer),
    });
  }

  /** An EventStream: the member is identified once; the stream ends when the call is cancelled or the member is removed (its connection dropped). */
  private eventStream(call: grpc.ServerWritableStream<W.EventStreamRequest, W.EventMessage>): void {
    const peer = this.identify(call as unknown as grpc.ServerUnaryCall<unknown, unknown>);
    if (!peer) {
      call.emit('error', { code: grpc.status.UNAUTHENTICATED, details: 'a client certificate of a current cluster member is required' });
      return;
    }
    let ended = false;
    const sink: EventSinkLike = {
      send: (text, id) => (ended ? true : call.write({ id, text })),
      drained: () =>
        new Promise<void>((resolve) => {
          if (ended) return resolve();
          call.once('drain', () => resolve());
          call.once('cancelled', () => resolve());
        }),
      end: () => {
        if (ended) return;
        ended = true;
        call.end();
      },
    };
    this.handlers.rpcEventStream(call.request, peer, sink).then(
      (close) => {
        call.once('cancelled', () => {
          ended = true;
          close();
        });
        call.once('error', () => {
          ended = true;
          close();
        });
      },
      (err) => {
        const e = errorBody(err);
        const md = new grpc.Metadata();
        md.set('hostd-status', String(e.status));
        ended = true;
        call.emit('error', { code: grpc.status.FAILED_PRECONDITION, details: e.body.error, metadata: md });
      },
    );
  }

  private implementation(): grpc.UntypedServiceImplementation {
    const h = this.handlers;
    const member =
      <Req, Res>(fn: (req: Req, peer: Member) => Promise<Res>): Unary =>
      (call, cb) => {
        const peer = this.identify(call);
        if (!peer) {
          cb({ code: grpc.status.UNAUTHENTICATED, details: 'a client certificate of a current cluster member is required' });
          return;
        }
        fn(call.request as Req, peer).then(
          (r) => cb(null, r),
          (err) => cb(toStatus(err)),
        );
      };
    const json = (fn: (msg: unknown, peer: Member) => Promise<unknown>) =>
      member<W.Json, W.Json>(async (req, peer) => {
        let msg: unknown;
        try {
          msg = JSON.parse(Buffer.from(req.json).toString('utf8') || 'null');
        } catch {
          throw new RpcError(grpc.status.INVALID_ARGUMENT, 'payload is not JSON');
        }
        const out = await fn(msg, peer);
        return { json: Buffer.from(JSON.stringify(out ?? null)) };
      });
    return {
      CallStream: ((call: grpc.ServerDuplexStream<W.CallBatch, W.ReplyBatch>) => this.callStream(call)) as grpc.handleBidiStreamingCall<
        W.CallBatch,
        W.ReplyBatch
      >,
      EventStream: ((call: grpc.ServerWritableStream<W.EventStreamRequest, W.EventMessage>) => this.eventStream(call)) as grpc.handleServerStreamingCall<
        W.EventStreamRequest,
        W.EventMessage
      >,
      Health: member(h.rpcHealth.bind(h)),
      Membership: member(h.rpcMembership.bind(h)),
      TokenDirectory: member(h.rpcTokenDirectory.bind(h)),
      TokenDirectoryGet: member((_req: W.Empty, peer) => h.rpcTokenDirectoryGet(peer)),
      Lease: json(h.rpcLease.bind(h)),
      ProxyConfig: json(h.rpcProxyConfig.bind(h)),
      // A member does not join again: Join is served on connections without a certificate.
      Join: ((_call, cb) =>
        cb({ code: grpc.status.ALREADY_EXISTS, details: 'this connection presents a member certificate; it is already in the cluster' })) as Unary,
    };
  }

  /** What a connection without a certificate may call: Join; anything else is UNAUTHENTICATED. */
  private joinImplementation(): grpc.UntypedServiceImplementation {
    const h = this.handlers;
    const refused = { code: grpc.status.UNAUTHENTICATED, details: 'a client certificate of a current cluster member is required' };
    const unauthenticated: Unary = (_call, cb) => cb(refused);
    return {
      CallStream: ((call: grpc.ServerDuplexStream<W.CallBatch, W.ReplyBatch>) => call.emit('error', refused)) as grpc.handleBidiStreamingCall<
        W.CallBatch,
        W.ReplyBatch
      >,
      EventStream: ((call: grpc.ServerWritableStream<W.EventStreamRequest, W.EventMessage>) => call.emit('error', refused)) as grpc.handleServerStreamingCall<
        W.EventStreamRequest,
        W.EventMessage
      >,
      Health: unauthenticated,
      Membership: unauthenticated,
      TokenDirectory: unauthenticated,
      TokenDirectoryGet: unauthenticated,
      Lease: unauthenticated,
      ProxyConfig: unauthenticated,
      Join: ((call, cb) => {
        h.rpcJoin(call.request as W.JoinRequest, call.getPeer()).then(
          (r) => cb(null, r),
          (err) => cb(toStatus(err)),
        );
      }) as Unary,
    };
  }

  async close(): Promise<void> {
    this.hasCreds = false;
    await new Promise<void>((resolve) => {
      this.tlsServer.close(() => resolve());
      for (const s of this.rawSockets) s.destroy();
    });
    this.injector.destroy();
    this.joinInjector.destroy();
    this.grpcServer.forceShutdown();
    this.joinServer.forceShutdown();
    this.refusedTrace.flush();
    this.refusedTrace.stop();
  }
}

const HTTP_TO_GRPC: Record<number, grpc.status> = {
  400: grpc.status.INVALID_ARGUMENT,
  401: grpc.status.UNAUTHENTICATED,
  403: grpc.status.PERMISSION_DENIED,
  404: grpc.status.NOT_FOUND,
  409: grpc.status.FAILED_PRECONDITION,
  503: grpc.status.UNAVAILABLE,
};

function toStatus(err: unknown): grpc.ServiceError | Partial<grpc.StatusObject> {
  if (err instanceof RpcError) return { code: err.code, details: err.message };
  if (err instanceof ApiError) return { code: HTTP_TO_GRPC[err.status] ?? grpc.status.INTERNAL, details: err.message };
  return { code: grpc.status.INTERNAL, details: (err as Error)?.message ?? String(err) };
}
