/**
 * A network-namespace lab for the proxy's runtime tests: a hub namespace
 * with a bridge, N node namespaces, a client namespace and an upstream
 * namespace, all on one private /24 that exists only inside these
 * namespaces. Every address is checked with `ip route get` to be reached
 * over the lab's own link before any traffic is sent. The client and the
 * upstream run inside their namespaces; nothing is sent from the host's own.
 *
 * Also: the upstream HTTP server (test/helpers/proxy-upstream.ts), a client
 * loop (test/helpers/proxy-client.ts), and a watcher that records, from
 * `ip monitor address` in every node namespace, each interval during which
 * a node had the floating address.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { NetnsHub, type LabHost } from './netns-hub.js';
import { ROOT } from './daemon.js';

/** The lab interface's name inside every namespace. */
export const LAN_DEV = 'lan0';

export type { LabHost };

export class ProxyLab extends NetnsHub {
  readonly nodes: LabHost[] = [];
  client!: LabHost;
  upstream!: LabHost;
  private procs: ChildProcess[] = [];

  constructor(readonly size: number) {
    super('p', { from: 150, spread: 40 });
  }

  /** The floating address the tests use. */
  get vip(): string {
    return `${this.subnet}.50`;
  }

  // The same interface name in every namespace: the floating address names one interface for all nodes.
  private host(name: string, last: number): Promise<LabHost> {
    return this.addHost(name, last, LAN_DEV);
  }

  async setup(): Promise<void> {
    await this.building(async () => {
      await this.makeHub();
      for (let i = 0; i < this.size; i++) this.nodes.push(await this.host(`n${i + 1}`, i + 1));
      this.client = await this.host('cl', 100);
      this.upstream = await this.host('up', 200);
      await this.checkRoutes([...this.nodes, this.client, this.upstream], [this.vip]);
    });
  }

  /** Starts the upstream HTTP server in its namespace; resolves once it listens. */
  async startUpstream(port = 8080): Promise<string> {
    const p = spawn(
      'ip',
      ['netns', 'exec', this.upstream.ns, process.execPath, path.join(ROOT, 'dist/test/helpers/proxy-upstream.js'), this.upstream.addr, String(port)],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    this.procs.push(p);
    await new Promise<void>((resolve, reject) => {
      const rl = readline.createInterface({ input: p.stdout! });
      rl.once('line', () => resolve());
      p.once('exit', (c) => reject(new Error(`upstream exited ${c}`)));
    });
    return `${this.upstream.addr}:${port}`;
  }

  /** Starts a long-running command in a namespace (killed at cleanup); resolves after its first output line. */
  async spawnIn(ns: string, args: string[]): Promise<ChildProcess> {
    const p = spawn('ip', ['netns', 'exec', ns, ...args], { stdio: ['ignore', 'pipe', 'inherit'] });
    this.procs.push(p);
    await new Promise<void>((resolve, reject) => {
      readline.createInterface({ input: p.stdout! }).once('line', () => resolve());
      p.once('exit', (c) => reject(new Error(`${args.join(' ')} exited ${c}`)));
    });
    return p;
  }

  /** A node script of test/helpers in a namespace. */
  helper(ns: string, script: string, ...args: string[]): Promise<ChildProcess> {
    return this.spawnIn(ns, [process.execPath, path.join(ROOT, 'dist/test/helpers', script), ...args]);
  }

  /** Runs a command inside a namespace to its end. */
  exec(ns: string, args: string[], input?: string): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const c = spawn('ip', ['netns', 'exec', ns, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      c.stdout.on('data', (d) => (stdout += d));
      c.stderr.on('data', (d) => (stderr += d));
      const t = setTimeout(() => c.kill('SIGKILL'), 30_000);
      c.on('exit', (code) => {
        clearTimeout(t);
        resolve({ code: code ?? 1, stdout, stderr });
      });
      // A command that reads no input may be gone before its stdin closes.
      c.stdin.on('error', () => undefined);
      c.stdin.end(input ?? '');
    });
  }

  /** Starts a client loop in the client namespace (see proxy-client.ts). */
  startClient(opts: { url: string; resolve: string; ca: string; intervalMs: number }): ClientLoop {
    const p = spawn(
      'ip',
      [
        'netns',
        'exec',
        this.client.ns,
        process.execPath,
        path.join(ROOT, 'dist/test/helpers/proxy-client.js'),
        opts.url,
        opts.resolve,
        opts.ca,
        String(opts.intervalMs),
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    this.procs.push(p);
    return new ClientLoop(p);
  }

  /** Watches every node namespace for the floating address (ip monitor). */
  watchVip(names: string[]): VipWatch {
    const w = new VipWatch(this.vip);
    this.nodes.forEach((n, i) => {
      const p = spawn('ip', ['-n', n.ns, '-ts', 'monitor', 'address'], { stdio: ['ignore', 'pipe', 'ignore'] });
      this.procs.push(p);
      w.attach(names[i], p);
    });
    return w;
  }

  override async cleanup(): Promise<void> {
    for (const p of this.procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
    this.procs = [];
    await super.cleanup();
  }
}

export interface Sample {
  /** ms since epoch when the request started. */
  t: number;
  ok: boolean;
  status: number;
  ms: number;
  /** Which node the upstream saw the request come from. */
  via: string | null;
  err: string | null;
}

export class ClientLoop {
  readonly samples: Sample[] = [];
  readonly exited: Promise<void>;

  constructor(private readonly p: ChildProcess) {
    const rl = readline.createInterface({ input: p.stdout! });
    rl.on('line', (l) => {
      try {
        this.samples.push(JSON.parse(l) as Sample);
      } catch {
        /* not a sample */
      }
    });
    this.exited = new Promise((r) => p.once('exit', () => r()));
  }

  /** Waits until a successful sample after `t` exists. */
  async okAfter(t: number, ms = 30_000): Promise<Sample> {
    const end = Date.now() + ms;
    for (;;) {
      const s = this.samples.find((x) => x.t >= t && x.ok);
      if (s) return s;
      if (Date.now() > end)
        throw new Error(`no successful request within ${ms} ms after ${new Date(t).toISOString()}; last: ${JSON.stringify(this.samples.slice(-3))}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /**
   * The longest client-observed unavailability around an event at `t0`:
   * from the last success that started at or before t0 (or t0) until the
   * first success that started after it.
   */
  gapAround(t0: number): { gapMs: number; failures: number } {
    const before = this.samples.filter((s) => s.ok && s.t <= t0).pop();
    const after = this.samples.find((s) => s.ok && s.t > t0 && (!before || s.t > before.t));
    if (!after) throw new Error('no success after the event');
    const from = before ? before.t + before.ms : t0;
    const failures = this.samples.filter((s) => !s.ok && s.t >= (before?.t ?? t0) && s.t <= after.t).length;
    return { gapMs: Math.max(0, after.t + after.ms - from), failures };
  }

  /**
   * The client-observed gap of a switch to `via` after `t0`: from the end of
   * the last success before the first answer through `via`, to the end of
   * that answer.
   */
  switchGap(t0: number, via: (v: string | null) => boolean): { gapMs: number; failures: number } {
    const first = this.samples.find((s) => s.ok && s.t > t0 && via(s.via));
    if (!first) throw new Error('no answer through the new holder');
    const last = this.samples.filter((s) => s.ok && s.t < first.t && !via(s.via)).pop();
    const from = last ? last.t + last.ms : t0;
    const failures = this.samples.filter((s) => !s.ok && s.t >= from && s.t <= first.t).length;
    return { gapMs: Math.max(0, first.t + first.ms - from), failures };
  }

  async stop(): Promise<void> {
    this.p.kill('SIGTERM');
    await this.exited;
  }
}

/** Intervals during which each node had the floating address, from `ip -ts monitor address`. */
export class VipWatch {
  readonly events: Array<{ node: string; t: number; added: boolean }> = [];

  constructor(readonly vip: string) {}

  attach(node: string, p: ChildProcess): void {
    const rl = readline.createInterface({ input: p.stdout! });
    // Only the address on the lab interface answers ARP; a copy parked on lo (handoff) does not.
    const needle = ` inet ${this.vip}/`;
    rl.on('line', (l) => {
      const m = /^\[([0-9T:.-]+)\]\s+(Deleted )?\d+: (\S+)/.exec(l);
      if (!m || !l.includes(needle) || m[3] !== LAN_DEV) return;
      // ip prints local time without a zone; microseconds after the dot.
      const t = new Date(m[1].slice(0, 23)).getTime();
      this.events.push({ node, t, added: !m[2] });
    });
  }

  /** Overlaps: moments at which two nodes had the address at once. */
  overlaps(): string[] {
    const evs = [...this.events].sort((a, b) => a.t - b.t || (a.added ? 1 : -1));
    const have = new Set<string>();
    const out: string[] = [];
    for (const e of evs) {
      if (e.added) {
        if (have.size > 0 && !have.has(e.node)) out.push(`${e.node} added the address at ${new Date(e.t).toISOString()} while ${[...have].join(',')} had it`);
        have.add(e.node);
      } else have.delete(e.node);
    }
    return out;
  }

  holders(): string[] {
    const have = new Set<string>();
    for (const e of [...this.events].sort((a, b) => a.t - b.t)) {
      if (e.added) have.add(e.node);
      else have.delete(e.node);
    }
    return [...have];
  }
}
