/**
 * Task events: the runner writes `tasks.created`, `tasks.progress`,
 * `tasks.log` and `tasks.ended` in the batches of the task store (the record
 * and its event together), progress events are throttled to steps, a task
 * interrupted by a restart gets its `tasks.ended`; and `hostctl task watch`
 * follows a running task through the stream (it would never poll again
 * within the test's time: the poll interval is an hour).
 */
import { expect } from 'chai';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import pino from 'pino';
import { Store } from '../../../daemon/store/store.js';
import { TaskRunner } from '../../../daemon/tasks/runner.js';
import { EventLog } from '../../../daemon/events/log.js';
import { EventService } from '../../../daemon/events/service.js';
import { DEFAULT_EVENT_SETTINGS } from '../../../daemon/events/settings.js';
import type { StoredEvent } from '../../../daemon/events/types.js';
import type { Caller } from '../../../daemon/lib/caller.js';
import { AdminClient } from '../../../daemon/cli/client.js';
import { watchTask } from '../../../daemon/cli/watch.js';
import { serveSse, STREAM_PATH } from '../../../api/http/events.js';
import { eventually, tempDir } from '../../helpers/daemon.js';

const admin: Caller = { tokenId: 'admin', tokenName: 'admin', scopes: [], transport: 'api', origin: 'n1' };

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

describe('task events', function () {
  let dir: string;
  let store: Store;
  let log: EventLog;
  let runner: TaskRunner;
  const seen: StoredEvent[] = [];

  beforeEach(async () => {
    dir = tempDir('hostd-task-events-');
    store = await Store.open(path.join(dir, 'db'));
    log = new EventLog(store, 'n1', DEFAULT_EVENT_SETTINGS);
    await log.init();
    seen.length = 0;
    log.listen((e) => seen.push(e));
    runner = new TaskRunner(store, 'n1', log);
    await runner.init();
  });
  afterEach(async () => {
    await runner.drain();
    await store.close().catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("a task's life is created, progress (running, then by steps), log lines, ended, in order, each with the record it reports", async () => {
    const rec = runner.start({ kind: 'lxc.container.move', title: 'Move', owner: 'ci', resource: 'lxc/7' }, async (t) => {
      t.log('copying');
      for (let p = 1; p <= 100; p++) t.progress(p);
      t.log('done');
      return { ok: true };
    });
    await runner.settled(rec.task_id);
    await runner.drain();
    const mine = seen.filter((e) => e.data.task_id === rec.task_id);
    const types = mine.map((e) => e.type);
    expect(types[0]).to.equal('tasks.created');
    expect(types.at(-1)).to.equal('tasks.ended');
    expect(mine.filter((e) => e.type === 'tasks.log').map((e) => e.data.text)).to.deep.equal(['copying', 'done']);
    // Progress: the running state, then one per 5 percent (1..100 in steps of 1 would be 100 events).
    const progress = mine.filter((e) => e.type === 'tasks.progress').map((e) => e.data.progress);
    expect(progress).to.deep.equal([0, 5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60, 65, 70, 75, 80, 85, 90, 95, 100]);
    expect(mine.at(-1)!.data).to.include({ state: 'succeeded', progress: 100 });
    expect(mine.at(-1)!.data.result).to.deep.equal({ ok: true });
    expect(mine.every((e) => e.resource === `tasks/${rec.task_id}` && e.actor === 'ci')).to.equal(true);
    // Readers of the task: vm.read or lxc.read.
    expect(mine[0].acl.scopes).to.deep.equal(['vm.read', 'lxc.read']);
    const stored = await log.read(0, 1000);
    expect(stored.map((e) => e.seq)).to.deep.equal(seen.map((e) => e.seq));
  });

  it('a task left running by a crash is marked failed at start with its tasks.log and tasks.ended events', async () => {
    const g = gate();
    const rec = runner.start({ kind: 'vms.vm.create', title: 'Create', owner: 'ci', resource: 'vms/1' }, async () => g.wait);
    await eventually(async () => (await runner.get(rec.task_id)).state === 'running', 10_000, 'running');
    await runner.drain();
    // The crash: the store goes away under the running task.
    await store.db.close();
    store = await Store.open(path.join(dir, 'db'));
    log = new EventLog(store, 'n1', DEFAULT_EVENT_SETTINGS);
    await log.init();
    const after: StoredEvent[] = [];
    log.listen((e) => after.push(e));
    runner = new TaskRunner(store, 'n1', log);
    expect(await runner.init()).to.equal(1);
    expect(after.map((e) => e.type)).to.deep.equal(['tasks.log', 'tasks.ended']);
    expect(after[1].data).to.include({ task_id: rec.task_id, state: 'failed', error: 'interrupted by a daemon restart' });
    g.open();
  });

  it('hostctl task watch follows the stream: each line once, in order, the bar, the ending, with no polling', async () => {
    const svc = new EventService(log, DEFAULT_EVENT_SETTINGS);
    const sock = path.join(dir, 'hostd.sock');
    let taskGets = 0;
    const server = http.createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (u.pathname === STREAM_PATH) {
        serveSse(
          { events: svc, authenticate: () => admin, resolvePeer: () => 'self', log: pino({ enabled: false }), requestLog: { write() {} } },
          req,
          res,
          'r1',
        );
        return;
      }
      const m = /^\/api\/v1\/tasks\/([^/]+)(\/logs)?$/.exec(u.pathname);
      if (!m) return send(404, { error: 'no' });
      if (m[2]) void runner.logLines(m[1], Number(u.searchParams.get('after_line') ?? 0), 500).then((l) => send(200, l));
      else {
        taskGets++;
        void runner.get(m[1]).then(
          (task) => send(200, { task }),
          () => send(404, { error: `task '${m[1]}' not found` }),
        );
      }
    });
    await new Promise<void>((r) => server.listen(sock, () => r()));
    const steps = [gate(), gate(), gate()];
    const rec = runner.start({ kind: 'vms.vm.create', title: 'Create', owner: 'ci', resource: 'vms/1' }, async (t) => {
      t.log('one');
      await steps[0].wait;
      t.log('two');
      t.progress(50);
      await steps[1].wait;
      t.log('three');
      await steps[2].wait;
      return {};
    });
    try {
      const out = new PassThrough();
      let text = '';
      out.on('data', (c) => (text += c));
      const watching = watchTask(new AdminClient(sock), rec.task_id, { intervalMs: 3_600_000, out, err: new PassThrough() });
      await eventually(() => svc.streams === 1 && text.includes(' one\n'), 30_000, 'the watch to follow the stream').catch((e) => {
        throw new Error(`${e.message}: streams ${svc.streams}, out ${JSON.stringify(text)}`);
      });
      steps[0].open();
      await eventually(() => text.includes(' two\n'), 30_000, 'line two');
      steps[1].open();
      steps[2].open();
      expect(await watching).to.equal(0);
      expect(text).to.match(/^(\d\d:\d\d:\d\d) one\n(\d\d:\d\d:\d\d) two\n(\d\d:\d\d:\d\d) three\ntask \S+ succeeded\n$/);
      expect(text).to.include(`task ${rec.task_id} succeeded`);
      expect(taskGets).to.equal(1);
    } finally {
      svc.close();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
