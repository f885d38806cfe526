/**
 * Loads proto/cluster.proto at run time (from the repository root, found from
 * this file: dist/cluster/proto.js or cluster/proto.ts) and exposes the
 * service definition and a client constructor, plus the message shapes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { decodeCallBatch, decodeReplyBatch, encodeCallBatch, encodeReplyBatch } from './wire.js';

function findProto(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4; i++) {
    const p = path.join(dir, 'proto', 'cluster.proto');
    if (fs.existsSync(p)) return p;
    dir = path.dirname(dir);
  }
  throw new Error('proto/cluster.proto not found above ' + path.dirname(fileURLToPath(import.meta.url)));
}

export const PROTO_PATH = findProto();

const definition = protoLoader.loadSync(PROTO_PATH, {
  keepCase: true,
  longs: Number,
  enums: String,
  defaults: true,
  oneofs: true,
});

// The forwarding stream's messages are encoded and decoded by hand (cluster/wire.ts): the same bytes, without proto-loader's generic conversion of every message.
const callStream = (definition['hostd.cluster.v1.Cluster'] as protoLoader.ServiceDefinition).CallStream;
callStream.requestSerialize = encodeCallBatch as (m: object) => Buffer;
callStream.requestDeserialize = decodeCallBatch;
callStream.responseSerialize = encodeReplyBatch as (m: object) => Buffer;
callStream.responseDeserialize = decodeReplyBatch;

const pkg = grpc.loadPackageDefinition(definition) as any;

export const ClusterService: grpc.ServiceDefinition = pkg.hostd.cluster.v1.Cluster.service;
export const ClusterClientCtor: grpc.ServiceClientConstructor = pkg.hostd.cluster.v1.Cluster;

// Message shapes (keepCase, defaults on).
import type { WireCaller } from './wire.js';
export type { WireCaller, CallFrame, CallBatch, ReplyFrame, ReplyBatch } from './wire.js';
/** What running one forwarded call gives, before it is framed (member side) or after (origin side). */
export interface CallOutcome {
  ok: boolean;
  result_json: string;
  status: number;
  error: string;
}
export interface HealthRequest {
  from: string;
  membership_version: number;
}
export interface HealthReply {
  node_id: string;
  name: string;
  membership_version: number;
  directory_versions: Record<string, number>;
}
export interface WireMember {
  peer_id: string;
  name: string;
  address: string;
  fingerprint: string;
  joined_at: string;
}
export interface MembershipUpdate {
  version: number;
  members: WireMember[];
  from: string;
  cluster_id: string;
}
export interface DirectoryToken {
  id: string;
  name: string;
  scopes: string[];
}
export interface DirectorySnapshot {
  owner: string;
  version: number;
  tokens: DirectoryToken[];
}
export interface JoinRequest {
  token: string;
  csr_pem: string;
  node_id: string;
  name: string;
  address: string;
}
export interface JoinReply {
  cert_pem: string;
  ca_cert_pem: string;
  ca_key_pem: string;
  membership: MembershipUpdate;
  directory: DirectorySnapshot[];
  lease_json: Buffer;
  proxy_config_json: Buffer;
}
export interface Ack {
  ok: boolean;
  detail: string;
}
export interface EventStreamRequest {
  caller: WireCaller;
  origin: string;
  args_json: string;
  last_event_id: string;
  request_id: string;
}
export interface EventMessage {
  id: string;
  text: string;
}
export type Empty = Record<string, never>;
export interface Json {
  json: Buffer;
}

/** Unary method names of the service, as the generated client names them. */
export type Method = 'Health' | 'Join' | 'Membership' | 'TokenDirectory' | 'TokenDirectoryGet' | 'Lease' | 'ProxyConfig';
