/**
 * Helpers for the cluster suites: pairing real daemons, running hostctl, and
 * a raw gRPC client that presents whatever certificate a test hands it.
 */
import fs from 'node:fs';
import path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { ClusterClientCtor } from '../../cluster/proto.js';
import { CLUSTER_SNI } from '../../cluster/client.js';
import { eventually, hostctl as runHostctl, type CommandResult, type TestDaemon } from '../helpers/daemon.js';

export function hostctl(d: TestDaemon, ...args: string[]): Promise<CommandResult> {
  return runHostctl(d.dataDir, args);
}

/** hostctl as a client of `d`'s API with `token` (HOSTD_URL, HOSTD_TOKEN), as from another machine. */
export function remoteHostctl(d: TestDaemon, token: string, ...args: string[]): Promise<CommandResult> {
  return runHostctl(d.dataDir, args, { HOSTD_URL: d.url, HOSTD_TOKEN: token });
}

export async function joinToken(d: TestDaemon, ttlSeconds?: number): Promise<string> {
  const r = await d.admin.request('POST', '/admin/cluster/join-token', ttlSeconds === undefined ? {} : { ttl_seconds: ttlSeconds });
  if (r.status !== 201) throw new Error(`join-token: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body.token;
}

/** init on the first node, join every other one through it (admin socket). */
export async function pair(nodes: TestDaemon[]): Promise<void> {
  const [first, ...rest] = nodes;
  const r = await first.admin.request('POST', '/admin/cluster/init', {});
  if (r.status !== 201) throw new Error(`init: ${r.status} ${JSON.stringify(r.body)}`);
  for (const n of rest) await joinTo(first, n);
  await allReachable(nodes);
}

/** `n` joins the cluster `first` belongs to. */
export async function joinTo(first: TestDaemon, n: TestDaemon): Promise<void> {
  const j = await n.admin.request('POST', '/admin/cluster/join', { address: first.clusterAddr, token: await joinToken(first) });
  if (j.status !== 200) throw new Error(`join: ${j.status} ${JSON.stringify(j.body)}`);
}

/** Waits until every node sees every other one reachable. */
export async function allReachable(nodes: TestDaemon[], ms = 60_000): Promise<void> {
  for (const n of nodes) {
    await eventually(
      async () => {
        const s = await n.admin.request('GET', '/admin/cluster/status');
        return s.body.members?.length === nodes.length && s.body.members.every((m: any) => m.reachable);
      },
      ms,
      `every member reachable from ${n.nodeId}`,
    );
  }
}

export interface Pem {
  caCertPem: string;
  certPem: string;
  keyPem: string;
}

/** A node's cluster certificate files. */
export function pemOf(d: TestDaemon): Pem & { caKeyPem: string } {
  const dir = path.join(d.dataDir, 'cluster');
  return {
    caCertPem: fs.readFileSync(path.join(dir, 'ca.crt'), 'utf8'),
    caKeyPem: fs.readFileSync(path.join(dir, 'ca.key'), 'utf8'),
    certPem: fs.readFileSync(path.join(dir, 'node.crt'), 'utf8'),
    keyPem: fs.readFileSync(path.join(dir, 'node.key'), 'utf8'),
  };
}

/**
 * A raw client of the cluster service at `address`, presenting `client` (or no
 * certificate) and trusting `trustCaPem` for the server.
 */
export function rawClient(address: string, trustCaPem: string, client: { certPem: string; keyPem: string } | null): any {
  const creds = grpc.credentials.createSsl(Buffer.from(trustCaPem), client ? Buffer.from(client.keyPem) : null, client ? Buffer.from(client.certPem) : null, {
    checkServerIdentity: () => undefined,
  });
  return new ClusterClientCtor(address, creds, { 'grpc.ssl_target_name_override': CLUSTER_SNI, 'grpc.initial_reconnect_backoff_ms': 100 });
}

export function rawCall(client: any, method: string, req: unknown, deadlineMs = 3000): Promise<any> {
  return new Promise((resolve, reject) => {
    client[method](req, new grpc.Metadata(), { deadline: Date.now() + deadlineMs }, (err: grpc.ServiceError | null, res: unknown) =>
      err ? reject(err) : resolve(res),
    );
  });
}

/** A CallStream opened by a raw client: batches out, reply frames in, and how it ended. */
export interface RawStream {
  /** Writes one batch of frames. */
  send(frames: Array<Record<string, unknown>>): void;
  /** Resolves with the replies to these ids (result_json as text), rejects when the stream fails first or after `ms`. */
  replies(ids: number[], ms?: number): Promise<Map<number, { id: number; ok: boolean; status: number; error: string; result_json: string }>>;
  /** Settles with the stream's error (or null when it ended cleanly). */
  ended: Promise<grpc.ServiceError | null>;
  cancel(): void;
}

export function rawStream(client: any): RawStream {
  const call = client.CallStream(new grpc.Metadata());
  const got = new Map<number, { id: number; ok: boolean; status: number; error: string; result_json: string }>();
  const parts = new Map<number, Buffer[]>();
  const waiters = new Set<() => void>();
  let failure: grpc.ServiceError | null | undefined;
  const ended = new Promise<grpc.ServiceError | null>((resolve) => {
    call.on('error', (e: grpc.ServiceError) => {
      failure = e;
      resolve(e);
      waiters.forEach((w) => w());
    });
    call.on('status', (st: grpc.StatusObject) => {
      if (st.code === grpc.status.OK) {
        failure ??= null;
        resolve(null);
        waiters.forEach((w) => w());
      }
    });
  });
  call.on('data', (b: any) => {
    for (const r of b.replies) {
      const chunks = parts.get(r.id) ?? [];
      chunks.push(r.result_json);
      if (r.more) {
        parts.set(r.id, chunks);
        continue;
      }
      parts.delete(r.id);
      got.set(r.id, { id: r.id, ok: r.ok, status: r.status, error: r.error, result_json: Buffer.concat(chunks).toString('utf8') });
    }
    waiters.forEach((w) => w());
  });
  return {
    send: (frames) => call.write({ calls: frames }),
    replies: (ids, ms = 5000) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no replies to ${ids.filter((i) => !got.has(i)).join(',')} within ${ms} ms`));
        }, ms);
        const check = () => {
          if (ids.every((i) => got.has(i))) {
            clearTimeout(timer);
            waiters.delete(check);
            resolve(new Map(ids.map((i) => [i, got.get(i)!])));
            return;
          }
          if (failure !== undefined) {
            clearTimeout(timer);
            waiters.delete(check);
            reject(failure ?? new Error('stream ended'));
          }
        };
        waiters.add(check);
        check();
      }),
    ended,
    cancel: () => call.cancel(),
  };
}

/** One forwarded-call frame sent over a fresh CallStream; resolves with its reply. */
export async function rawForward(
  client: any,
  frame: Record<string, unknown>,
  ms = 5000,
): Promise<{ ok: boolean; status: number; error: string; result_json: string }> {
  const s = rawStream(client);
  try {
    s.send([{ id: 1, ...frame }]);
    return (await s.replies([1], ms)).get(1)!;
  } finally {
    s.cancel();
  }
}

export async function peersOf(d: TestDaemon, token: string): Promise<any[]> {
  const r = await d.request('GET', '/api/v1/peers', { token });
  expect(r.status, r.text).to.equal(200);
  return r.body.peers;
}

export async function activityOf(d: TestDaemon, token: string): Promise<any[]> {
  const r = await d.request('GET', '/api/v1/activity?limit=200', { token });
  expect(r.status, r.text).to.equal(200);
  return r.body.events;
}

export { grpc };
