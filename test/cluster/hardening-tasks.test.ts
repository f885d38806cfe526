/**
 * House item 7 (cluster part): a task that runs on a member is read through
 * the same peer_id from another member, and is not found without it. No API
 * operation of this build starts a task yet, so the task is started on the
 * member by the test-only admin command of the tasks domain
 * (HOSTD_TEST_HOOKS=1, daemon/tasks/index.ts).
 */
import { expect } from 'chai';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { pair } from './util.js';

describe('hardening: a task on a member is found through its peer_id', function () {
  this.timeout(120_000);
  let a: TestDaemon;
  let b: TestDaemon;

  before(async () => {
    const env = { HOSTD_TEST_HOOKS: '1', HOSTD_CLUSTER_PROBE_MS: '500' };
    [a, b] = await Promise.all([startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'alpha' } }), startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bravo' } })]);
    await pair([a, b]);
  });

  after(async () => {
    await Promise.all([a, b].map((d) => d?.stop()));
  });

  it('GET /tasks/{id}, /tasks/{id}/logs and /tasks with peer_id find it on the member; without peer_id, 404 and not listed', async () => {
    const started = await b.admin.request('POST', '/admin/test/tasks', { ms: 60_000 });
    expect(started.status, JSON.stringify(started.body)).to.equal(201);
    const id: string = started.body.task.task_id;
    expect(started.body.task.node_id).to.equal(b.nodeId);
    const token = await a.token('reader', ['vm.read']);

    const there = await a.request('GET', `/api/v1/tasks/${id}?peer_id=${b.nodeId}`, { token });
    expect(there.status, there.text).to.equal(200);
    expect(there.body.task.task_id).to.equal(id);
    expect(there.body.task.node_id).to.equal(b.nodeId);
    expect(there.body.task.state).to.be.oneOf(['queued', 'running']);

    const logs = await a.request('GET', `/api/v1/tasks/${id}/logs?peer_id=${b.nodeId}`, { token });
    expect(logs.status, logs.text).to.equal(200);
    expect(logs.body.lines.map((l: any) => l.text)).to.include('started by the test hook');

    const listed = await a.request('GET', `/api/v1/tasks?peer_id=${b.nodeId}`, { token });
    expect(listed.status, listed.text).to.equal(200);
    expect(listed.body.tasks.map((t: any) => t.task_id)).to.include(id);

    const here = await a.request('GET', `/api/v1/tasks/${id}`, { token });
    expect(here.status, here.text).to.equal(404);
    expect(here.body).to.deep.equal({ error: `task '${id}' not found` });
    const hereList = await a.request('GET', '/api/v1/tasks', { token });
    expect(hereList.body.tasks.map((t: any) => t.task_id)).to.not.include(id);
  });

  it('the test hook is absent without HOSTD_TEST_HOOKS', async () => {
    const plain = await startDaemon();
    try {
      const r = await plain.admin.request('POST', '/admin/test/tasks', {});
      expect(r.status).to.equal(404);
    } finally {
      await plain.stop();
    }
  });
});
