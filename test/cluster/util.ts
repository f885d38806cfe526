/**
 * Helpers for the cluster suites: pairing real daemons, running hostctl, and
 * a raw gRPC client that presents whatever certificate a test hands it.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import * as grpc from '@grpc/grpc-js';
import { expect } from 'chai';
import { ClusterClientCtor } from '../../cluster/proto.js';
import { CLUSTER_SNI } from '../../cluster/client.js';
import { eventually, HOSTCTL, type TestDaemon } from '../helpers/daemon.js';

const run = promisify(execFile);

export async function hostctl(d: TestDaemon, ...args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const r = await run(process.execPath, [HOSTCTL, '--data-dir', d.dataDir, ...args], { env: { ...process.env } });
    return { code: 0, stdout: r.stdout, stderr: r.stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' };
  }
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
  for (const n of rest) {
    const j = await n.admin.request('POST', '/admin/cluster/join', { address: first.clusterAddr, token: await joinToken(first) });
    if (j.status !== 200) throw new Error(`join: ${j.status} ${JSON.stringify(j.body)}`);
  }
  // Every node sees every other one reachable.
  for (const n of nodes) {
    await eventually(async () => {
      const s = await n.admin.request('GET', '/admin/cluster/status');
      return s.body.members?.length === nodes.length && s.body.members.every((m: any) => m.reachable);
    }, 15_000, `every member reachable from ${n.nodeId}`);
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
  const creds = grpc.credentials.createSsl(
    Buffer.from(trustCaPem),
    client ? Buffer.from(client.keyPem) : null,
    client ? Buffer.from(client.certPem) : null,
    { checkServerIdentity: () => undefined },
  );
  return new ClusterClientCtor(address, creds, { 'grpc.ssl_target_name_override': CLUSTER_SNI, 'grpc.initial_reconnect_backoff_ms': 100 });
}

export function rawCall(client: any, method: string, req: unknown, deadlineMs = 3000): Promise<any> {
  return new Promise((resolve, reject) => {
    client[method](req, new grpc.Metadata(), { deadline: Date.now() + deadlineMs }, (err: grpc.ServiceError | null, res: unknown) => (err ? reject(err) : resolve(res)));
  });
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
