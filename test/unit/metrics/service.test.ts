/**
 * What the metrics service counts as the daemon goes: tasks through the
 * runner domains see (started, active, ended by state, duration), and calls
 * through the request log (each MCP tool of a batch once); the request log
 * it wraps still gets every line.
 */
import { expect } from 'chai';
import client from 'prom-client';
import path from 'node:path';
import { Store } from '../../../daemon/store/store.js';
import { TaskRunner } from '../../../daemon/tasks/runner.js';
import { MetricsService } from '../../../daemon/metrics/service.js';
import type { RequestLine } from '../../../daemon/logger.js';
import { eventually, tempDir } from '../../helpers/daemon.js';
import { sample } from '../../helpers/metrics.js';

describe('metrics service', function () {
  this.timeout(60_000);

  it('counts tasks from their start to their end, by kind and final state', async () => {
    const store = await Store.open(path.join(tempDir('hostd-metrics-'), 'db'));
    const runner = new TaskRunner(store);
    await runner.init();
    const m = new MetricsService();
    const tasks = m.observeTasks(runner);
    try {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      const a = tasks.start({ kind: 'demo.thing.make', title: 'a', owner: 't', resource: 'x/1' }, async () => held);
      tasks.start({ kind: 'demo.thing.make', title: 'b', owner: 't', resource: 'x/2' }, async () => {
        throw new Error('no');
      });
      let text = '';
      await eventually(
        async () => (sample((text = (await m.expose()).text), 'hostd_tasks_ended_total', { kind: 'demo.thing.make', state: 'failed' }) ?? 0) === 1,
        30_000,
        'the failed task counted',
      );
      expect(sample(text, 'hostd_tasks_started_total', { kind: 'demo.thing.make' })).to.equal(2);
      expect(sample(text, 'hostd_tasks_active', { kind: 'demo.thing.make' })).to.equal(1);
      release();
      await runner.settled(a.task_id);
      await eventually(
        async () => (sample((text = (await m.expose()).text), 'hostd_tasks_ended_total', { kind: 'demo.thing.make', state: 'succeeded' }) ?? 0) === 1,
        30_000,
        'the succeeded task counted',
      );
      expect(sample(text, 'hostd_tasks_active', { kind: 'demo.thing.make' })).to.equal(0);
      expect(sample(text, 'hostd_task_duration_seconds_count', { kind: 'demo.thing.make' })).to.equal(2);
    } finally {
      await runner.drain();
      await store.close();
    }
  });

  it('counts calls from the request log by operation, transport and status; the wrapped log gets every line', async () => {
    const m = new MetricsService();
    const seen: RequestLine[] = [];
    const log = m.observeRequests({ write: (l) => seen.push(l) });
    log.write({ req_id: '1', method: 'GET', path: '/api/v1/folders', status: 200, op: 'folders_list', ms: 3 });
    log.write({ req_id: '2', method: 'POST', path: '/mcp', status: 200, op: 'folders_list,system_health', ms: 5, transport: 'mcp' });
    log.write({ req_id: '3', method: 'GET', path: '/api/v1/nope', status: 404, ms: 1 });
    expect(seen.map((l) => l.req_id)).to.deep.equal(['1', '2', '3']);
    const text = (await m.expose()).text;
    expect(sample(text, 'hostd_api_requests_total', { operation: 'folders_list', transport: 'api', status: '200' })).to.equal(1);
    expect(sample(text, 'hostd_api_requests_total', { operation: 'folders_list', transport: 'mcp', status: '200' })).to.equal(1);
    expect(sample(text, 'hostd_api_requests_total', { operation: 'system_health', transport: 'mcp', status: '200' })).to.equal(1);
    expect(sample(text, 'hostd_api_requests_total', { operation: 'none', transport: 'api', status: '404' })).to.equal(1);
    expect(text).to.not.include('/api/v1/nope');
  });

  it("times calls into the same duration series prom-client's own histogram gives for the same observations", async () => {
    const m = new MetricsService();
    const log = m.observeRequests({ write: () => undefined });
    // The buckets of hostd_api_request_duration_seconds, observed through prom-client as it was before the tally.
    const bounds = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
    const reg = new client.Registry();
    const h = new client.Histogram({ name: 'hostd_api_request_duration_seconds', help: 'x', labelNames: ['operation'], buckets: bounds, registers: [reg] });
    // On the bounds, between them, beyond the last, and an MCP batch of two tools.
    const calls: Array<[string | undefined, number]> = [
      ['folders_list', 1],
      ['folders_list', 0.3],
      ['folders_list', 2.5],
      ['system_health,folders_list', 7],
      [undefined, 0.01],
      ['folders_list', 120_000],
      ['system_health', 60_000],
    ];
    for (const [op, ms] of calls) {
      log.write({ req_id: 'r', method: 'GET', path: '/x', status: 200, op, ms });
      for (const o of op ? op.split(',') : ['none']) h.observe({ operation: o }, ms / 1000);
    }
    const series = (text: string) =>
      text
        .split('\n')
        .filter((l) => l.startsWith('hostd_api_request_duration_seconds'))
        .sort();
    const want = series(await reg.metrics());
    expect(want.length).to.equal(3 * (bounds.length + 3));
    expect(series((await m.expose()).text)).to.deep.equal(want);
  });

  it('times forwarded calls by the member they went to and the status the caller got; self and unknown peers pass through uncounted', async () => {
    const m = new MetricsService();
    expect((await m.expose()).text).to.not.include('hostd_forwarded_calls_total');
    const unreachable = Object.assign(new Error('member p3 cannot be reached'), { status: 502 });
    const fwd = m.observeForwarder({
      resolve: (peerId: string) =>
        peerId === 'self'
          ? ('self' as const)
          : peerId === 'p2'
            ? { forward: async () => ({ ok: true }) }
            : peerId === 'p3'
              ? {
                  forward: async () => {
                    throw unreachable;
                  },
                }
              : undefined,
    });
    expect(fwd.resolve('self')).to.equal('self');
    expect(fwd.resolve('nobody')).to.equal(undefined);
    const p2 = fwd.resolve('p2') as { forward(...a: unknown[]): Promise<unknown> };
    expect(await p2.forward()).to.deep.equal({ ok: true });
    expect(await p2.forward()).to.deep.equal({ ok: true });
    const p3 = fwd.resolve('p3') as { forward(...a: unknown[]): Promise<unknown> };
    let thrown: unknown;
    await p3.forward().catch((err) => (thrown = err));
    expect(thrown).to.equal(unreachable);
    const text = (await m.expose()).text;
    expect(sample(text, 'hostd_forwarded_calls_total', { peer: 'p2', status: '200' })).to.equal(2);
    expect(sample(text, 'hostd_forwarded_calls_total', { peer: 'p3', status: '502' })).to.equal(1);
    expect(sample(text, 'hostd_forwarded_call_duration_seconds_count', { peer: 'p2' })).to.equal(2);
    expect(text).to.not.include('peer="self"');
    expect(text).to.not.include('peer="nobody"');
  });
});
