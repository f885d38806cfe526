/**
 * The event stream's figures, each against a baseline of the same run:
 *
 * - events_delivery_ratio_{1,100,1000}: p99 from sending a mutation
 *   (POST /api/v1/folders) to its `activity` event reaching a subscribed SSE
 *   client, over the p99 of the mutation's own round trip, with 1, 100 and
 *   1,000 subscribers connected (target at most 2 at 1,000).
 * - events_replay_per_s and events_replay_ratio: a subscription resuming
 *   100,000 events behind (the log and subscription code on a store, no
 *   HTTP), over reading the same rows from the store directly.
 * - events_idle_subscriber_kib: the daemon's resident memory per idle SSE
 *   subscriber (1,000 of them).
 * - events_delivery_ratio_all_2: the same on a members=all stream of one of
 *   two paired members, for mutations on the other, beside
 *   events_delivery_ratio_all_2_baseline (a subscriber on the first member's
 *   own stream, mutations there, the same two daemons). The cluster curve
 *   measures the same at 2, 4 and 8 members with `delivery()` below
 *   (scale_cluster_all_delivery_ratio_m<M>, scale-cluster.ts).
 * - api_overhead_with_subscribers_ratio: GET /api/v1/folders throughput
 *   without subscribers over the same with 100 connected (target at most 1.1).
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { eventually, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { pair } from '../cluster/util.js';
import { load, median, pct, print } from './lib.js';
import { Store } from '../../daemon/store/store.js';
import { EventLog } from '../../daemon/events/log.js';
import { EventService } from '../../daemon/events/service.js';
import { DEFAULT_EVENT_SETTINGS } from '../../daemon/events/settings.js';
import { SYSTEM_ACL } from '../../daemon/events/filter.js';
import type { Caller } from '../../daemon/lib/caller.js';

const STREAM = '/api/v1/events/stream';

function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

/** An SSE subscriber that reads and drops everything, or hands each data line to `onData`. */
function subscribe(d: TestDaemon, token: string, query = '', onData?: (json: string) => void): Promise<http.ClientRequest> {
  const u = new URL(d.url);
  return new Promise((resolve, reject) => {
    const agent = new http.Agent({ keepAlive: false });
    const req = http.request(
      { host: u.hostname, port: u.port, path: STREAM + query, agent, headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` } },
      (res) => {
        if (res.statusCode !== 200) return reject(new Error(`subscribe: ${res.statusCode}`));
        res.setEncoding('utf8');
        let buf = '';
        res.on('data', (c: string) => {
          if (!onData) return;
          buf += c;
          for (let i = buf.indexOf('\n'); i !== -1; i = buf.indexOf('\n')) {
            const line = buf.slice(0, i);
            buf = buf.slice(i + 1);
            if (line.startsWith('data: ')) onData(line.slice(6));
          }
        });
        resolve(req);
      },
    );
    req.on('error', () => undefined);
    req.end();
  });
}

async function idle(d: TestDaemon, token: string, n: number): Promise<http.ClientRequest[]> {
  const out: http.ClientRequest[] = [];
  for (let i = 0; i < n; i++) out.push(await subscribe(d, token, '', () => undefined));
  return out;
}

/** One delivery measurement: p99 from a mutation's send to its event, the mutations' own p99, and their ratio. */
export interface Delivery {
  ratio: number;
  deliveryP99: number;
  tripP99: number;
}

/** Where the mutations of a delivery measurement go: a daemon and a token of it with files.manage. */
export interface Target {
  d: TestDaemon;
  token: string;
}

/**
 * The delivery ratio with `subscribers` on `d`: `count` mutations (POST
 * /api/v1/folders, one at a time), each timed from its send to its `activity`
 * event on the measured subscriber, over the p99 of the mutations' own round
 * trips. The mutations go to `on`, in turn (by default `d` itself with
 * `token`), and the measured subscriber reads `query` (a members=all stream
 * reads the other members' events). The folders are named
 * `bench-<tag><subscribers>-<round>-<i>`.
 */
export async function delivery(
  d: TestDaemon,
  token: string,
  subscribers: number,
  round: number,
  opts: { on?: Target[]; query?: string; tag?: string; count?: number } = {},
): Promise<Delivery> {
  const on = opts.on?.length ? opts.on : [{ d, token }];
  const others = await idle(d, token, subscribers - 1);
  const arrived = new Map<string, number>();
  const waiting = new Map<string, () => void>();
  const mine = await subscribe(d, token, opts.query ?? '?types=activity', (json) => {
    const id = JSON.parse(json).data?.metadata?.request_id as string | undefined;
    if (!id) return;
    arrived.set(id, performance.now());
    waiting.get(id)?.();
  });
  const trips: number[] = [];
  const deliveries: number[] = [];
  try {
    for (let i = 0; i < (opts.count ?? 200); i++) {
      const id = `bench-${opts.tag ?? ''}${subscribers}-${round}-${i}`;
      const to = on[i % on.length];
      let timer: NodeJS.Timeout | undefined;
      const seen = new Promise<void>((resolve, reject) => {
        waiting.set(id, resolve);
        // Bounded: an event that never comes fails the figure instead of hanging the bench.
        timer = setTimeout(() => reject(new Error(`no event for ${id} within 60 s`)), 60_000);
      });
      seen.catch(() => undefined);
      try {
        const t0 = performance.now();
        const r = await fetch(`${to.d.url}/api/v1/folders`, {
          method: 'POST',
          headers: { authorization: `Bearer ${to.token}`, 'content-type': 'application/json', 'x-request-id': id },
          body: JSON.stringify({ storage_id: 'default', name: id }),
        });
        const t1 = performance.now();
        if (r.status !== 201) throw new Error(`folder create: ${r.status} ${await r.text()}`);
        await seen;
        trips.push(t1 - t0);
        deliveries.push(arrived.get(id)! - t0);
      } finally {
        clearTimeout(timer);
        waiting.delete(id);
      }
    }
  } finally {
    mine.destroy();
    for (const o of others) o.destroy();
  }
  trips.sort((a, b) => a - b);
  deliveries.sort((a, b) => a - b);
  const deliveryP99 = pct(deliveries, 0.99);
  const tripP99 = pct(trips, 0.99);
  return { ratio: deliveryP99 / tripP99, deliveryP99, tripP99 };
}

/** Waits until `token` of `a` is known on every member of `others` (the token sync), which a members=all stream needs. */
export async function tokenKnownOn(a: TestDaemon, token: string, others: TestDaemon[]): Promise<void> {
  for (const m of others) {
    await eventually(
      async () => (await a.request('GET', `/api/v1/events?peer_id=${m.nodeId}&limit=1`, { token })).status === 200,
      60_000,
      `the token known on ${m.nodeId}`,
    );
  }
}

export async function eventsBench(): Promise<void> {
  const d = await startDaemon({
    env: { HOSTD_LOG_LEVEL: 'info', HOSTD_EVENTS_MAX_STREAMS_PER_TOKEN: '5000' },
    configYaml: 'http_limits:\n  max_connections: 5000\n  max_connections_per_client: 5000\n',
    logToFile: true,
  });
  try {
    const token = await d.token('bench', ['files.read', 'files.manage', 'system.read']);
    // Memory per idle subscriber, first, on a daemon whose heap has not yet grown and freed for other subscribers.
    const before = rss(d.proc.pid!);
    const subs = await idle(d, token, 1000);
    const after = rss(d.proc.pid!);
    print('events_idle_subscriber_kib', (after - before) / 1000 / 1024, 1);
    for (const s of subs) s.destroy();
    for (const n of [1, 100, 1000]) {
      const ratios: number[] = [];
      for (let round = 0; round < 3; round++) ratios.push((await delivery(d, token, n, round)).ratio);
      print(`events_delivery_ratio_${n}`, median(ratios));
    }
    // API overhead with 100 subscribers connected, against none, alternating rounds.
    const url = d.url + '/api/v1/folders';
    const headers = { authorization: `Bearer ${token}` };
    await load(url, { headers, duration: 1 });
    const without: number[] = [];
    const withSubs: number[] = [];
    for (let i = 0; i < 3; i++) {
      without.push((await load(url, { headers, duration: 3 })).rps);
      const hundred = await idle(d, token, 100);
      withSubs.push((await load(url, { headers, duration: 3 })).rps);
      for (const s of hundred) s.destroy();
    }
    print('api_rps_without_subscribers', median(without), 0);
    print('api_rps_with_100_subscribers', median(withSubs), 0);
    print('api_overhead_with_subscribers_ratio', median(without) / median(withSubs));
  } finally {
    await d.stop();
  }
  await allMembers();
  await replay();
}

/**
 * events_delivery_ratio_all_2: the delivery ratio of a members=all stream
 * on A for mutations made on B (each event crosses the forwarded stream),
 * beside events_delivery_ratio_all_2_baseline: the same two daemons, a
 * subscriber on A's own stream for mutations on A.
 */
export async function allMembers(): Promise<void> {
  const env = { HOSTD_LOG_LEVEL: 'info' };
  const a = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'alpha' }, logToFile: true });
  const b = await startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bravo' }, logToFile: true });
  try {
    await pair([a, b]);
    const scopes = ['files.read', 'files.manage', 'system.read'];
    const onA = await a.token('bench-a', scopes);
    const onB = await b.token('bench-b', scopes);
    // A's token reaches B by the token sync: the members=all stream opens once it has.
    await tokenKnownOn(a, onA, [b]);
    const base: number[] = [];
    const all: number[] = [];
    for (let round = 0; round < 3; round++) {
      base.push((await delivery(a, onA, 1, round, { tag: 'base-' })).ratio);
      all.push((await delivery(a, onA, 1, round, { on: [{ d: b, token: onB }], query: '?members=all&types=activity', tag: 'all-' })).ratio);
    }
    print('events_delivery_ratio_all_2_baseline', median(base));
    print('events_delivery_ratio_all_2', median(all));
  } finally {
    await Promise.all([a.stop(), b.stop()]);
  }
}

/** Resuming 100,000 events behind, against reading the same rows from the store. */
async function replay(): Promise<void> {
  const dir = tempDir('hostd-bench-events-');
  const store = await Store.open(path.join(dir, 'db'), { sync: false });
  try {
    const log = new EventLog(store, 'bench', { ...DEFAULT_EVENT_SETTINGS, reserveBlock: 200_000 });
    await log.init();
    const N = 100_000;
    for (let i = 0; i < N; i += 1000) {
      await log.append(
        Array.from({ length: 1000 }, (_, j) => ({
          type: 'activity',
          domain: 'activity',
          resource: `folders/f${i + j}`,
          actor: 'bench',
          summary: `Created folder f${i + j}`,
          data: { id: String(i + j), category: 'storage', severity: 'info', metadata: { transport: 'api' } },
          acl: SYSTEM_ACL,
        })),
        false,
      );
    }
    const t0 = performance.now();
    let rows = 0;
    for await (const _v of store.sub('events').values()) rows++;
    const direct = rows / ((performance.now() - t0) / 1000);
    const svc = new EventService(log, log.settings);
    const reader: Caller = { tokenId: 'b', tokenName: 'bench', scopes: ['system.read'], transport: 'api', origin: 'bench' };
    let got = 0;
    let done!: () => void;
    const finished = new Promise<void>((r) => (done = r));
    const t1 = performance.now();
    const first = (await svc.list(reader, { limit: 1 })).events[0].cursor;
    svc.openStream(
      reader,
      { cursor: first },
      {
        send: () => {
          if (++got >= N - 1) done();
          return true;
        },
        drained: async () => undefined,
        end: () => undefined,
      },
    );
    await finished;
    const replayRate = got / ((performance.now() - t1) / 1000);
    svc.close();
    print('events_store_read_per_s', direct, 0);
    print('events_replay_per_s', replayRate, 0);
    print('events_replay_ratio', replayRate / direct);
  } finally {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
