/**
 * An in-memory cluster for lease and proxy-config tests: N nodes, each with its own real
 * Store (LevelDB in a temp dir), a LeaseManager and a ReplicatedConfig of the proxy configuration, joined by links that
 * deliver messages to the other nodes' handle() with controllable partitions, dead nodes,
 * delays and a per-call deadline. Messages and replies are JSON round-tripped like on a wire.
 *
 * The InvariantChecker records every (epoch -> holder) that any node ever stored as committed
 * or held, and every moment two live nodes hold at one epoch.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { Store } from '../../daemon/store/store.js';
import { LeaseManager, type LeasePeerLink, type LeaseState } from '../../cluster/lease.js';
import { ReplicatedConfig } from '../../cluster/replicated.js';
import { proxyConfigSpec, type ProxyConfig } from '../../daemon/proxy/config.js';

const silent = pino({ level: 'silent' });

/** Deterministic PRNG (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Unreachable extends Error {
  constructor(from: string, to: string, why: string) {
    super(`${to} is unreachable from ${from}: ${why}`);
  }
}

export interface NetNode {
  id: string;
  dir: string;
  store: Store;
  lease: LeaseManager;
  config: ReplicatedConfig<ProxyConfig>;
  link: LeasePeerLink;
  up: boolean;
}

export interface NetOptions {
  /** Per-call deadline, ms. */
  deadlineMs?: number;
  /** One-way delay for each message, ms: a number or a function (from, to) => ms. */
  delay?: number | ((from: string, to: string) => number);
  /** Seed for the default random delay. */
  seed?: number;
}

export class InvariantChecker {
  /** epoch -> holder, from every committed record any node stored or held. */
  readonly committed = new Map<number, string>();
  readonly violations: string[] = [];
  /** (epoch/holder) -> nodes that durably accepted it, observed on the wire. */
  readonly accepts = new Map<string, Set<string>>();
  maxEpoch = 0;

  constructor(private readonly net: LeaseNet) {}

  observe(node: string, s: LeaseState): void {
    if (s.holder !== null && s.epoch > 0) this.record(node, s.epoch, s.holder);
    this.checkNow();
  }

  record(node: string, epoch: number, holder: string): void {
    const prev = this.committed.get(epoch);
    if (prev !== undefined && prev !== holder) this.violations.push(`epoch ${epoch}: ${prev} and ${holder} (seen on ${node})`);
    if (prev === undefined) this.committed.set(epoch, holder);
    this.maxEpoch = Math.max(this.maxEpoch, epoch);
  }

  /** No two live nodes hold at one epoch. */
  checkNow(): void {
    const byEpoch = new Map<number, string>();
    for (const n of this.net.nodes.values()) {
      if (!n.up) continue;
      const s = n.lease.state();
      if (s.holding && s.holder !== n.id) this.violations.push(`${n.id} holds a record naming ${s.holder}`);
      if (s.holding) {
        const other = byEpoch.get(s.epoch);
        if (other) this.violations.push(`${other} and ${n.id} both hold at epoch ${s.epoch}`);
        byEpoch.set(s.epoch, n.id);
      }
    }
  }

  noteAccept(node: string, epoch: number, holder: string): void {
    const k = `${epoch}/${holder}`;
    let s = this.accepts.get(k);
    if (!s) this.accepts.set(k, (s = new Set()));
    s.add(node);
  }

  /** Every committed epoch above `from` was accepted on the wire by at least majority-1 nodes (the proposer's own accept is local). */
  checkMajorities(from = 1): void {
    const n = this.net.ids.length;
    const need = Math.floor(n / 2) + 1;
    for (const [epoch, holder] of this.committed) {
      if (epoch <= from) continue;
      const got = this.accepts.get(`${epoch}/${holder}`)?.size ?? 0;
      if (got < need - 1) this.violations.push(`epoch ${epoch} (${holder}) committed with only ${got} remote accepts`);
    }
  }
}

export class LeaseNet {
  readonly nodes = new Map<string, NetNode>();
  readonly ids: string[];
  readonly checker: InvariantChecker;
  /** Partition groups; nodes in different groups cannot talk. Empty: fully connected. */
  private groups: string[][] = [];
  readonly root: string;
  deadlineMs: number;
  delay: (from: string, to: string) => number;
  /** Counts of lease messages delivered, by type. */
  readonly delivered: Record<string, number> = {};
  /** Incarnation per node: a link from a crashed incarnation never delivers again. */
  private readonly generation = new Map<string, number>();

  private constructor(ids: string[], opts: NetOptions) {
    this.ids = ids;
    this.root = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-lease-'));
    this.deadlineMs = opts.deadlineMs ?? 250;
    const r = rng(opts.seed ?? 1);
    const d = opts.delay ?? 0;
    this.delay = typeof d === 'function' ? d : () => (d > 0 ? Math.floor(r() * d) : 0);
    this.checker = new InvariantChecker(this);
  }

  static async create(n: number, opts: NetOptions = {}): Promise<LeaseNet> {
    const ids = Array.from({ length: n }, (_, i) => `n${i + 1}`);
    const net = new LeaseNet(ids, opts);
    for (const id of ids) await net.open(id);
    return net;
  }

  node(id: string): NetNode {
    const n = this.nodes.get(id);
    if (!n) throw new Error(`no node ${id}`);
    return n;
  }

  lease(id: string): LeaseManager {
    return this.node(id).lease;
  }

  config(id: string): ReplicatedConfig<ProxyConfig> {
    return this.node(id).config;
  }

  /** `cluster init` on `first`, the others adopt its record as a join reply would carry it. */
  async bootstrap(first = this.ids[0]!): Promise<void> {
    const s = await this.lease(first).initialize(first);
    for (const id of this.ids) if (id !== first) await this.lease(id).adopt({ holder: s.holder, epoch: s.epoch });
  }

  connected(a: string, b: string): boolean {
    const na = this.nodes.get(a);
    const nb = this.nodes.get(b);
    if (!na?.up || !nb?.up) return false;
    if (this.groups.length === 0) return true;
    return this.groups.some((g) => g.includes(a) && g.includes(b));
  }

  /** Splits the cluster; nodes not named form one more group together. */
  partition(...groups: string[][]): void {
    const named = new Set(groups.flat());
    const rest = this.ids.filter((id) => !named.has(id));
    this.groups = rest.length ? [...groups, rest] : groups;
  }

  heal(): void {
    this.groups = [];
  }

  /** A crash: the node stops answering and sending; its store is closed. */
  async kill(id: string): Promise<void> {
    const n = this.node(id);
    if (!n.up) return;
    n.up = false;
    n.lease.stop();
    n.config.stop();
    await sleep(5); // let in-flight local work fail or finish
    await n.store.close();
  }

  /** Reopens the node's store and builds fresh managers from it. */
  async restart(id: string): Promise<NetNode> {
    const n = this.node(id);
    if (n.up) await this.kill(id);
    return this.open(id);
  }

  /** Runs sync() on every live node, `rounds` times. */
  async syncAll(rounds = 2): Promise<void> {
    for (let i = 0; i < rounds; i++) {
      await Promise.all([...this.nodes.values()].filter((n) => n.up).map((n) => n.lease.sync().catch(() => undefined)));
    }
  }

  async close(): Promise<void> {
    for (const n of this.nodes.values()) {
      n.lease.stop();
      n.config.stop();
      if (n.up) {
        n.up = false;
        await n.store.close().catch(() => undefined);
      }
    }
    fs.rmSync(this.root, { recursive: true, force: true });
  }

  private async open(id: string): Promise<NetNode> {
    const dir = path.join(this.root, id);
    fs.mkdirSync(dir, { recursive: true });
    const store = await Store.open(dir);
    const gen = (this.generation.get(id) ?? 0) + 1;
    this.generation.set(id, gen);
    const link = this.makeLink(id, gen);
    const lease = new LeaseManager(store, link, silent);
    const config = new ReplicatedConfig(store, link, silent, proxyConfigSpec);
    await lease.init();
    await config.init();
    const node: NetNode = { id, dir, store, lease, config, link, up: true };
    this.nodes.set(id, node);
    lease.onChange((s) => this.checker.observe(id, s));
    this.checker.observe(id, lease.state());
    return node;
  }

  private makeLink(self: string, gen: number): LeasePeerLink {
    const alive = () => this.generation.get(self) === gen && this.nodes.get(self)?.up === true;
    const call = async (to: string, msg: unknown, kind: 'lease' | 'config'): Promise<unknown> => {
      if (!alive()) throw new Unreachable(self, to, 'this node is down');
      if (!this.connected(self, to)) throw new Unreachable(self, to, 'no route');
      const wire = JSON.parse(JSON.stringify(msg));
      const work = (async () => {
        await sleep(this.delay(self, to));
        if (!alive() || !this.connected(self, to)) throw new Unreachable(self, to, 'dropped');
        const target = this.node(to);
        const raw = kind === 'lease' ? await target.lease.handle(wire) : await target.config.handle(wire);
        const reply = JSON.parse(JSON.stringify(raw));
        if (kind === 'lease') {
          this.delivered[wire.type] = (this.delivered[wire.type] ?? 0) + 1;
          if (wire.type === 'accept' && reply.ok) this.checker.noteAccept(to, wire.epoch, wire.holder);
        }
        await sleep(this.delay(to, self));
        if (!alive() || !this.connected(to, self)) throw new Unreachable(self, to, 'reply dropped');
        return reply;
      })();
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Unreachable(self, to, `no answer within ${this.deadlineMs} ms`)), this.deadlineMs);
      });
      work.catch(() => undefined); // a late failure after the deadline is not an unhandled rejection
      try {
        return await Promise.race([work, deadline]);
      } finally {
        clearTimeout(timer);
      }
    };
    return {
      selfId: self,
      members: () => [...this.ids],
      send: (to, msg) => call(to, msg, 'lease'),
      sendProxyConfig: (to, msg) => call(to, msg, 'config'),
      isReachable: async (to) => {
        await sleep(this.delay(self, to));
        return alive() && this.connected(self, to);
      },
    };
  }
}
