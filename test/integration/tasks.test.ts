/**
 * Background tasks (issue 2, item 6): the runner against a real Store; a daemon
 * restart marking an interrupted task failed and the tasks endpoints reading it;
 * `hostctl task watch` on that task; and watchTask() following a task to success
 * against a small fake admin server (a stand-in for the daemon, since no API call
 * starts a task in this build).
 */
import { expect } from 'chai';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { ApiError } from '../../daemon/lib/errors.js';
import { AdminClient } from '../../daemon/cli/client.js';
import { watchTask } from '../../daemon/cli/watch.js';
import { Store } from '../../daemon/store/store.js';
import { TaskRunner, type TaskRecord } from '../../daemon/tasks/runner.js';
import { eventually, hostctl, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { API, expectError, raw } from '../helpers/conformance.js';

/** hostctl's task log lines without the time each starts with (HH:MM:SS, local time). */
const untimed = (text: string) => {
  expect(text).to.not.match(/^\d+: /m);
  return text.replace(/^\d\d:\d\d:\d\d /gm, '');
};

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

async function rejectsWith(p: Promise<unknown>, status: number): Promise<ApiError> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(ApiError);
    expect((e as ApiError).status).to.equal(status);
    return e as ApiError;
  }
  throw new Error(`expected a ${status} rejection`);
}

describe('background tasks', function () {
  describe('TaskRunner with a real Store', () => {
    let store: Store;
    let runner: TaskRunner;

    before(async () => {
      store = await Store.open(path.join(tempDir('hostd-runner-'), 'db'));
      runner = new TaskRunner(store);
      expect(await runner.init()).to.equal(0);
    });
    after(async () => {
      await runner.drain();
      await store.close();
    });

    it('runs a task that logs and reports progress; list shows it while it runs; it ends succeeded with its result', async () => {
      const g = gate();
      const rec = runner.start({ kind: 'demo', title: 'Demo task', owner: 'tester', resource: 'vms/1' }, async (t) => {
        t.log('starting');
        t.progress(10);
        for (let i = 2; i <= 12; i++) t.log(`line ${i}`);
        t.progress(40.6);
        await g.wait;
        t.log('finishing');
        t.progress(90);
        return { built: 'image-1' };
      });
      expect(rec.task_id).to.match(/^task_/);
      expect(rec).to.include({ kind: 'demo', title: 'Demo task', owner: 'tester', target: 'vms/1' });
      // The record is shown as written, one write after another: wait for the one written after the last of these calls.
      const running = await eventually(
        async () => {
          const r = await runner.get(rec.task_id);
          return r.state === 'running' && r.log_lines === 12 && r.progress === 41 ? r : undefined;
        },
        20_000,
        'task running with 12 lines and progress 41 (40.6 rounded)',
      );
      expect(running.started_at).to.be.a('string');
      expect((await runner.listActive()).map((t) => t.task_id)).to.include(rec.task_id);

      // Paging through the log while it runs.
      const first = await runner.logLines(rec.task_id, 0, 5);
      expect(first.lines.map((l) => l.line)).to.deep.equal([1, 2, 3, 4, 5]);
      expect(first.lines[0].text).to.equal('starting');
      expect(first.next_after_line).to.equal(5);
      const mid = await runner.logLines(rec.task_id, 9, 2);
      expect(mid.lines.map((l) => [l.line, l.text])).to.deep.equal([
        [10, 'line 10'],
        [11, 'line 11'],
      ]);
      const rest = await runner.logLines(rec.task_id, 11, 200);
      expect(rest.lines.map((l) => l.line)).to.deep.equal([12]);
      expect(rest.total_lines).to.equal(12);
      const none = await runner.logLines(rec.task_id, 12, 200);
      expect(none.lines).to.deep.equal([]);
      expect(none.next_after_line).to.equal(12);

      g.open();
      const done = await runner.settled(rec.task_id);
      expect(done).to.include({ state: 'succeeded', progress: 100, error: null, log_lines: 13 });
      expect(done.result).to.deep.equal({ built: 'image-1' });
      expect(done.finished_at).to.be.a('string');
      expect((await runner.listActive()).map((t) => t.task_id)).to.not.include(rec.task_id);
      // Persisted: the store has the final record and every line.
      const stored = await store.sub<TaskRecord>('tasks').get(rec.task_id);
      expect(stored).to.include({ state: 'succeeded', log_lines: 13 });
      expect((await runner.logLines(rec.task_id, 0, 500)).lines.map((l) => l.line)).to.deep.equal(Array.from({ length: 13 }, (_, i) => i + 1));
    });

    it('counts only the log lines that can be read: log_lines, total_lines and the lines agree at every moment', async () => {
      const logged = gate();
      const g = gate();
      const rec = runner.start({ kind: 'demo', title: 'Burst of lines', owner: 'tester', resource: '' }, async (t) => {
        for (let i = 1; i <= 12; i++) t.log(`line ${i}`);
        logged.open();
        await g.wait;
      });
      // The twelve lines were logged in one go and their writes are still on their way to the store.
      await logged.wait;
      const all = (n: number) => Array.from({ length: n }, (_, i) => i + 1);
      for (const end = Date.now() + 20_000; ; ) {
        const counted = (await runner.get(rec.task_id)).log_lines;
        const page = await runner.logLines(rec.task_id, 0, 500);
        expect(
          page.lines.map((l) => l.line),
          `total_lines ${page.total_lines}`,
        ).to.deep.equal(all(page.total_lines));
        expect(page.total_lines, `the record counted ${counted}`).to.be.at.least(counted);
        if (page.total_lines === 12) break;
        if (Date.now() > end) throw new Error(`the log stayed at ${page.total_lines} of 12 lines`);
        await new Promise((r) => setImmediate(r));
      }
      g.open();
      expect(await runner.settled(rec.task_id)).to.include({ state: 'succeeded', log_lines: 12 });
    });

    it('shows a task ended only once every line it logged can be read', async () => {
      const rec = runner.start({ kind: 'demo', title: 'Ends at once', owner: 'tester', resource: '' }, async (t) => {
        t.log('about to fail');
        throw new Error('disk on fire');
      });
      // Poll as a watcher does: the first read that shows the task ended must find its last line.
      let seen: TaskRecord;
      for (const end = Date.now() + 20_000; ; ) {
        seen = await runner.get(rec.task_id);
        if (seen.state === 'failed' || seen.state === 'succeeded') break;
        if (Date.now() > end) throw new Error(`the task stayed ${seen.state}`);
        await new Promise((r) => setImmediate(r));
      }
      const logs = await runner.logLines(rec.task_id);
      expect(seen).to.include({ state: 'failed', error: 'disk on fire', log_lines: 2 });
      expect(logs.lines.map((l) => l.text)).to.deep.equal(['about to fail', 'failed: disk on fire']);
      expect(logs.total_lines).to.equal(2);
    });

    it('a task that throws ends failed with its error, logged as the last line', async () => {
      const rec = runner.start({ kind: 'demo', title: 'Failing task', owner: 'tester', resource: '' }, async (t) => {
        t.log('about to fail');
        t.progress(50);
        throw new Error('disk on fire');
      });
      const done = await runner.settled(rec.task_id);
      expect(done).to.include({ state: 'failed', error: 'disk on fire', progress: 50 });
      const logs = await runner.logLines(rec.task_id);
      expect(logs.lines.map((l) => l.text)).to.deep.equal(['about to fail', 'failed: disk on fire']);
      expect((await runner.listActive()).map((t) => t.task_id)).to.not.include(rec.task_id);
    });

    it('keeps the logs of tasks apart and answers 404 for an unknown task', async () => {
      const a = runner.start({ kind: 'k', title: 'A', owner: 'o', resource: '' }, async (t) => t.log('from a'));
      const b = runner.start({ kind: 'k', title: 'B', owner: 'o', resource: '' }, async (t) => t.log('from b'));
      await Promise.all([runner.settled(a.task_id), runner.settled(b.task_id)]);
      expect((await runner.logLines(a.task_id)).lines.map((l) => l.text)).to.deep.equal(['from a']);
      expect((await runner.logLines(b.task_id)).lines.map((l) => l.text)).to.deep.equal(['from b']);
      const e = await rejectsWith(runner.get('task_nope'), 404);
      expect(e.message).to.contain('task_nope');
      await rejectsWith(runner.logLines('task_nope'), 404);
    });
  });

  describe('a daemon restart with a task running', () => {
    let d: TestDaemon;
    let dir: string;
    let token: string;
    let taskId: string;

    before(async function () {
      this.timeout(60_000);
      dir = tempDir('hostd-tasks-');
      // Initialise the data dir, then write a running task into its store while no daemon holds it.
      await (await startDaemon({ dataDir: dir })).stop();
      const store = await Store.open(path.join(dir, 'db'));
      const runner = new TaskRunner(store);
      await runner.init();
      const rec = runner.start({ kind: 'template_build', title: 'Build template tpl-1', owner: 'ci-bot', resource: 'templates/tpl-1' }, async (t) => {
        t.log('downloading base image');
        t.progress(20);
        t.log('booting build machine');
        t.progress(40);
        t.log('running cloud-init');
        await new Promise(() => undefined); // never ends: the daemon "dies" now
      });
      taskId = rec.task_id;
      const tasks = store.sub<TaskRecord>('tasks');
      await eventually(
        async () => {
          const r = await tasks.get(taskId);
          return r?.state === 'running' && r.log_lines === 3 && r.progress === 40 ? r : undefined;
        },
        5000,
        'the running record on disk',
      );
      await store.close();
      d = await startDaemon({ dataDir: dir });
      token = await d.token('tasks-reader', ['vm.read']);
    });

    it('logs that it marked the interrupted task failed', () => {
      const line = d.logs.find((l) => /interrupted/.test(l.msg ?? ''));
      expect(line, JSON.stringify(d.logs.slice(0, 5))).to.not.equal(undefined);
      expect(line.count).to.equal(1);
    });

    it('GET /tasks/{id} shows it failed with an interrupted error; GET /tasks lists it no more', async () => {
      const r = await d.request('GET', `${API}/tasks/${taskId}`, { token });
      expect(r.status).to.equal(200);
      expect(r.body.task).to.include({ task_id: taskId, state: 'failed', progress: 40, kind: 'template_build' });
      expect(r.body.task.error).to.match(/interrupted/);
      expect(r.body.task.finished_at).to.be.a('string');
      const list = await d.request('GET', `${API}/tasks`, { token });
      expect(list.status).to.equal(200);
      expect(list.body.tasks.map((t: TaskRecord) => t.task_id)).to.not.include(taskId);
    });

    it('GET /tasks/{id}/logs pages the numbered lines, the interruption last; limit 1-500, default 200', async () => {
      const all = await d.request('GET', `${API}/tasks/${taskId}/logs`, { token });
      expect(all.status).to.equal(200);
      expect(all.body.lines.map((l: { line: number }) => l.line)).to.deep.equal([1, 2, 3, 4]);
      expect(all.body.lines[3].text).to.match(/interrupted/);
      const one = await d.request('GET', `${API}/tasks/${taskId}/logs?after_line=1&limit=1`, { token });
      expect(one.body.lines.map((l: { text: string }) => l.text)).to.deep.equal(['booting build machine']);
      expect(one.body.next_after_line).to.equal(2);
      expect((await d.request('GET', `${API}/tasks/${taskId}/logs?limit=500`, { token })).status).to.equal(200);
      expect((await d.request('GET', `${API}/tasks/${taskId}/logs?after_line=4`, { token })).body.lines).to.deep.equal([]);
      for (const q of ['limit=0', 'limit=501', 'limit=x', 'after_line=-1']) {
        expectError(await raw(d.url, 'GET', `${API}/tasks/${taskId}/logs?${q}`, { token }), 400, `'${q.split('=')[0]}'`);
      }
    });

    it('an unknown task is 404 naming it, on get and logs; vm.read is needed', async () => {
      expectError(await raw(d.url, 'GET', `${API}/tasks/task_nope`, { token }), 404, 'task_nope');
      expectError(await raw(d.url, 'GET', `${API}/tasks/task_nope/logs`, { token }), 404, 'task_nope');
      const other = await d.token('tasks-other', ['files.read']);
      expectError(await raw(d.url, 'GET', `${API}/tasks/${taskId}`, { token: other }), 403, "'vm.read'");
    });

    it('hostctl task watch on the ended task prints its lines and the failure, and exits 1', async () => {
      const r = await hostctl(dir, ['task', 'watch', taskId]);
      expect(r.code, r.stderr).to.equal(1);
      // Each line with the time the task wrote it (local time), in order, numbered nowhere.
      expect(r.stdout).to.match(/^\d\d:\d\d:\d\d downloading base image\n\d\d:\d\d:\d\d .*\n\d\d:\d\d:\d\d running cloud-init$/m);
      expect(r.stdout).to.match(/failed: .*interrupted/);
    });

    it('hostctl task watch on an unknown task exits 1 naming it', async () => {
      const r = await hostctl(dir, ['task', 'watch', 'task_nope']);
      expect(r.code).to.equal(1);
      expect(r.stderr).to.contain('task_nope');
    });
  });

  describe('watchTask() against a fake admin socket', () => {
    /** Serves one task that moves 0 -> 50 -> 100 over successive polls, growing its log. */
    function fakeAdmin(sock: string, final: 'succeeded' | 'failed') {
      const id = 'task_fake1';
      const steps = [
        { state: 'running', progress: 0, lines: ['starting'] },
        { state: 'running', progress: 50, lines: ['starting', 'halfway'] },
        { state: final, progress: final === 'succeeded' ? 100 : 50, lines: ['starting', 'halfway', final === 'succeeded' ? 'done' : 'broke'] },
      ];
      let polls = 0;
      const afterLines: number[] = [];
      const server = http.createServer((req, res) => {
        const u = new URL(req.url ?? '/', 'http://x');
        const step = steps[Math.min(polls, steps.length - 1)];
        const send = (status: number, body: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body));
        };
        if (u.pathname === `${API}/tasks/${id}`) {
          polls++;
          const s = steps[Math.min(polls - 1, steps.length - 1)];
          send(200, { task: { task_id: id, state: s.state, progress: s.progress, error: s.state === 'failed' ? 'broke' : null } });
        } else if (u.pathname === `${API}/tasks/${id}/logs`) {
          const after = Number(u.searchParams.get('after_line') ?? 0);
          afterLines.push(after);
          const s = steps[Math.min(polls - 1, steps.length - 1)] ?? step;
          const lines = s.lines.map((text, i) => ({ line: i + 1, text, time: new Date().toISOString() })).filter((l) => l.line > after);
          send(200, { task_id: id, lines, next_after_line: lines.length ? lines[lines.length - 1].line : after, total_lines: s.lines.length });
        } else send(404, { error: `task '${u.pathname.split('/')[4]}' not found` });
      });
      return {
        id,
        afterLines,
        listen: () => new Promise<void>((r) => server.listen(sock, () => r())),
        close: () => new Promise<void>((r) => server.close(() => r())),
      };
    }

    const capture = () => {
      const s = new PassThrough();
      let text = '';
      s.on('data', (c) => (text += c));
      return { s, text: () => text };
    };

    it('prints each line once, in order, and exits 0 when the task succeeds', async () => {
      const sock = path.join(tempDir('hostd-fake-'), 'hostd.sock');
      const fake = fakeAdmin(sock, 'succeeded');
      await fake.listen();
      try {
        const out = capture();
        const err = capture();
        const code = await watchTask(new AdminClient(sock), fake.id, { intervalMs: 10, out: out.s, err: err.s });
        expect(code).to.equal(0);
        expect(untimed(out.text())).to.equal(`starting\nhalfway\ndone\ntask ${fake.id} succeeded\n`);
        expect(fake.afterLines).to.deep.equal([0, 1, 2]);
        expect(fs.existsSync(sock)).to.equal(true);
      } finally {
        await fake.close();
      }
    });

    it('exits 1 with the error when the task fails, and when the task is unknown', async () => {
      const sock = path.join(tempDir('hostd-fake-'), 'hostd.sock');
      const fake = fakeAdmin(sock, 'failed');
      await fake.listen();
      try {
        const out = capture();
        const code = await watchTask(new AdminClient(sock), fake.id, { intervalMs: 10, out: out.s, err: capture().s });
        expect(code).to.equal(1);
        expect(untimed(out.text())).to.match(/^broke$/m);
        expect(out.text()).to.contain(`task ${fake.id} failed: broke`);
        const err = capture();
        expect(await watchTask(new AdminClient(sock), 'task_other', { intervalMs: 10, out: capture().s, err: err.s })).to.equal(1);
        expect(err.text()).to.contain('task_other');
      } finally {
        await fake.close();
      }
    });
  });
});
