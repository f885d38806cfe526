/**
 * The gap a client feels while the proxy moves, shared by the proxy section
 * (three members: proxy_move_gap_ms, proxy_takeover_gap_ms) and the cluster
 * curve (2, 4 and 8 members: scale_cluster_move_gap_ms_m<M>).
 *
 * It runs in network namespaces made for it (test/helpers/proxy-lab.ts): the
 * floating address needs a LAN of its own, which loopback is not. Every member
 * is a daemon in a namespace of the lab; the upstream and the client are in
 * theirs; the client asks https://web.lab.test/ at the floating address every
 * `intervalMs`, and the upstream says which member the request came through.
 * The lab is made for the largest size at once; members are started as the
 * cluster grows. Caddy runs only on the holder.
 */
import fs from 'node:fs';
import path from 'node:path';
import { eventually, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { allReachable, joinTo } from '../cluster/util.js';
import { LAN_DEV, ProxyLab, type ClientLoop, type VipWatch } from '../helpers/proxy-lab.js';
import { proxyNodeEnv, proxyYaml } from '../helpers/proxy-node.js';
import { cpuMs } from './lib.js';

/**
 * Where a move's gap went, in ms from the move call (t0), from the floating
 * address's own changes (`ip monitor` in every member's namespace):
 * `answered` the move call's answer, `released` the old holder's removal of
 * the address, `claimed` the new holder's add, `served` the end of the
 * client's first answer through the new holder.
 */
export interface MovePhases {
  answered: number;
  released: number;
  claimed: number;
  served: number;
}

export class GapCluster {
  readonly nodes: TestDaemon[] = [];
  /** Which member holds the proxy (index in `nodes`). */
  holder = 0;
  client?: ClientLoop;
  /** The phases of every timed move (moveTo), in order. */
  readonly phases: MovePhases[] = [];
  private watch?: VipWatch;
  private tokens: string[] = [];
  private upstream = '';

  private constructor(
    readonly lab: ProxyLab,
    readonly probeMs: number,
    readonly intervalMs: number,
  ) {}

  /** Makes the lab with room for `size` members and starts its upstream; no member runs yet. */
  static async open(size: number, opts: { probeMs?: number; intervalMs?: number } = {}): Promise<GapCluster> {
    if (!(await ProxyLab.available())) throw new Error('the gap figures need root (network namespaces)');
    const lab = new ProxyLab(size);
    await lab.setup();
    const g = new GapCluster(lab, opts.probeMs ?? 500, opts.intervalMs ?? 20);
    try {
      g.upstream = await lab.startUpstream(8080);
      g.watch = lab.watchVip(lab.nodes.map((_, i) => String(i)));
    } catch (err) {
      await g.close();
      throw err;
    }
    return g;
  }

  private api(i: number, m: string, p: string, b?: unknown) {
    return this.nodes[i].request(m, `/api/v1${p}`, { token: this.tokens[i], body: b });
  }

  private async serving(i: number): Promise<boolean> {
    const s = (await this.api(i, 'GET', '/proxy/host-status')).body;
    return s.vip.claimed && s.applied_version !== null;
  }

  /**
   * Starts members until `count` run. The first growth makes the cluster and
   * the proxy (an entry to the upstream, the floating address) on member 0,
   * which then holds it. Then the proxy visits every new member once (each
   * one's first Caddy start is not a move to time) and comes back to the
   * holder, and the client starts on the first growth. With `quiet`, waits
   * until the members are calm before returning (see `calm`).
   */
  async grow(count: number, opts: { quiet?: boolean } = {}): Promise<void> {
    const from = this.nodes.length;
    if (count > this.lab.nodes.length) throw new Error(`the lab has room for ${this.lab.nodes.length} members, not ${count}`);
    const started = await Promise.all(
      this.lab.nodes.slice(from, count).map((n, k) =>
        startDaemon({
          netns: n.ns,
          env: { ...proxyNodeEnv(n.addr, `bench-${from + k + 1}`), HOSTD_CLUSTER_PROBE_MS: String(this.probeMs) },
          configYaml: proxyYaml(n.addr),
        }),
      ),
    );
    this.nodes.push(...started);
    if (from === 0) {
      const r = await this.nodes[0].admin.request('POST', '/admin/cluster/init', {});
      if (r.status !== 201) throw new Error(`init: ${r.status} ${JSON.stringify(r.body)}`);
    }
    for (const n of started) if (n !== this.nodes[0]) await joinTo(this.nodes[0], n);
    await allReachable(this.nodes, 120_000);
    for (const [k, d] of started.entries()) this.tokens.push(await d.token(`b${from + k}`, ['proxy.read', 'proxy.manage']));
    if (from === 0) {
      await this.api(0, 'PATCH', '/proxy', { enabled: true });
      await this.api(0, 'POST', '/proxy/domains', { name: 'lab.test', cert_source: 'internal' });
      const [uh, up] = this.upstream.split(':');
      await this.api(0, 'POST', '/proxy/domains/lab.test/entries', { subdomain: 'web', host: uh, port: Number(up) });
      await this.api(0, 'PUT', '/proxy/vip', { vip: this.lab.vip, vip_iface: LAN_DEV, vip_prefix: 24 });
    }
    const back = this.holder;
    for (const i of [...Array.from({ length: count - from }, (_, k) => from + k).filter((i) => i !== back), back]) {
      await this.api(this.holder, 'POST', '/proxy/move', { peer_id: this.nodes[i].nodeId });
      await eventually(() => this.serving(i), 20_000, `node ${i + 1} serving`);
      this.holder = i;
    }
    if (!this.client) {
      const bundle = path.join(tempDir('hostd-bench-ca-'), 'roots.pem');
      // One root for the whole cluster (the internal CA's root is derived alike on every member).
      fs.writeFileSync(bundle, (await this.api(0, 'GET', '/proxy/certs')).body.internal_ca.root_pem);
      this.client = this.lab.startClient({ url: 'https://web.lab.test/', resolve: this.lab.vip, ca: bundle, intervalMs: this.intervalMs });
      await this.client.okAfter(Date.now());
    }
    if (opts.quiet) await calm(this.nodes.map((n) => n.proc.pid));
  }

  /** Moves the proxy from the holder to member `to`; resolves with the client-observed gap in ms. */
  async moveTo(to: number): Promise<number> {
    const client = this.client!;
    // A pause between moves: each gap is measured from a client that was being answered.
    await new Promise((r) => setTimeout(r, 300));
    const t0 = Date.now();
    const r = await this.api(this.holder, 'POST', '/proxy/move', { peer_id: this.nodes[to].nodeId });
    if (r.status !== 200) throw new Error(`move: ${r.status} ${r.text}`);
    const via = this.lab.nodes[to].addr;
    const answered = Date.now() - t0;
    const first = await eventually(() => client.samples.find((s) => s.t > t0 && s.ok && s.via === via), 30_000, 'the new holder answering');
    const from = this.holder;
    this.holder = to;
    const change = (node: number, added: boolean) => this.watch?.events.find((e) => e.t >= t0 - 5 && e.node === String(node) && e.added === added);
    this.phases.push({
      answered,
      released: (change(from, false)?.t ?? NaN) - t0,
      claimed: (change(to, true)?.t ?? NaN) - t0,
      served: first.t + first.ms - t0,
    });
    return client.switchGap(t0, (v) => v === via).gapMs;
  }

  /** `k` moves round the members (each to the next after the holder); their gaps in ms. */
  async moves(k: number): Promise<number[]> {
    const gaps: number[] = [];
    for (let i = 0; i < k; i++) gaps.push(await this.moveTo((this.holder + 1) % this.nodes.length));
    return gaps;
  }

  /** Kills the holder; resolves with the gap until the client is answered through another member, in ms. */
  async takeover(): Promise<number> {
    const client = this.client!;
    await new Promise((r) => setTimeout(r, 500));
    const t0 = Date.now();
    await this.nodes[this.holder].kill();
    const old = this.lab.nodes[this.holder].addr;
    await eventually(() => client.samples.find((s) => s.t > t0 && s.ok && s.via !== old), 60_000, 'an answer after the takeover');
    return client.switchGap(t0, (v) => v !== null && v !== old).gapMs;
  }

  /** Stops the client and every member, and deletes the lab (also after a failure part-way). */
  async close(): Promise<void> {
    try {
      await this.client?.stop();
      await Promise.all(this.nodes.map((d) => d.stop()));
    } finally {
      await this.lab.cleanup();
    }
  }
}

/**
 * Waits until every process uses under `msPerS` of CPU per second, at most
 * `boundMs`. Members that joined make the cluster's proxy CA root again
 * (about 2 s of CPU each, lib.ts `settle`), which a move measured meanwhile
 * would count. Not settle's 3% of a core: a lab member is never that idle
 * (a health probe every 500 ms, the proxy's tick every 100 ms on the
 * holder), so the bar is set above that and below a root being made.
 */
async function calm(pids: Array<number | undefined>, msPerS = 150, boundMs = 90_000): Promise<void> {
  const started = Date.now();
  let last = pids.map(cpuMs);
  let used: number[] = [];
  while (Date.now() - started < boundMs) {
    await new Promise((r) => setTimeout(r, 2000));
    const now = pids.map(cpuMs);
    used = now.map((c, i) => (c === undefined || last[i] === undefined ? 0 : (c - last[i]!) / 2));
    if (used.every((u) => u <= msPerS)) return;
    last = now;
  }
  process.stdout.write(`# lab members still busy after ${boundMs} ms (ms of CPU per s: ${used.join(' ')}); measuring anyway\n`);
}
