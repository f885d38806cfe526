/**
 * `lxc.state` events against the real LXC: each settled change a call makes
 * (created, RUNNING, FROZEN, STOPPED, deleted) once, by the caller; a
 * container stopped behind hostd's back (lxc-stop from outside, its init
 * killed) reported by the driver's lxc-monitor watch as STOPPED with
 * reason init-exited; a change while the daemon was down reported once
 * at the next open; and hostd killed (SIGKILL) right after a change was
 * stored: its event is in the log once after the restart (it is written in
 * the change's batch), neither lost nor repeated.
 */
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { cleanupLxc, initPid, lxcEnv, requireLxc, type LxcEnv } from '../../helpers/lxc-env.js';
import { eventually, tempDir } from '../../helpers/daemon.js';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';
import { headCursor, stateEventsNow, stateEventsUntil, type StateEvent } from '../../helpers/state-events.js';

describe('lxc runtime: lxc.state events', function () {
  this.timeout(300_000);
  let env: LxcEnv;
  let dataDir: string;
  let pools: Record<string, string>;

  before(async function () {
    await requireLxc(this);
    dataDir = tempDir('hostd-lxc-events-');
    env = await lxcEnv({ dataDir });
    pools = env.pools;
  });
  after(cleanupLxc);

  const states = (evs: StateEvent[]) => evs.map((e) => e.data.state);
  const lxcPath = () => path.join(dataDir, 'lxc');
  const infoState = (id: number) =>
    execFileSync('lxc-info', ['-P', lxcPath(), '-n', `svc-lxc-${id}`, '-s', '-H'])
      .toString()
      .trim();

  async function create(name: string): Promise<number> {
    const r = await env.req('POST', '/lxc', { name, template: 'bb' });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    return r.body.container.lxcid as number;
  }
  async function call(method: string, p: string): Promise<void> {
    const r = await env.req(method, p);
    expect(r.status, `${method} ${p}: ${JSON.stringify(r.body)}`).to.equal(200);
  }

  it('reports each change a call makes once, in order, by the caller: created, RUNNING, FROZEN, RUNNING, STOPPED, deleted', async () => {
    const cursor = await headCursor(env.req);
    const id = await create('ev-calls');
    await call('POST', `/lxc/${id}/start`);
    await call('POST', `/lxc/${id}/start`); // already running: no change, no event
    await call('POST', `/lxc/${id}/freeze`);
    await call('POST', `/lxc/${id}/unfreeze`);
    await call('POST', `/lxc/${id}/stop`);
    await call('DELETE', `/lxc/${id}`);
    const evs = await stateEventsUntil(env.req, 'lxc', `lxc/${id}`, cursor, (e) => states(e).includes('deleted'));
    expect(states(evs)).to.deep.equal(['created', 'RUNNING', 'FROZEN', 'RUNNING', 'STOPPED', 'deleted']);
    for (const e of evs) {
      expect(e.type).to.equal('lxc.state');
      expect(e.resource).to.equal(`lxc/${id}`);
      expect(e.actor).to.match(/^lxc-/); // the env's token, by name
      expect(e.data.reason).to.equal(undefined);
    }
  });

  it("a container stopped behind hostd's back (lxc-stop from outside) is STOPPED with reason init-exited, once", async () => {
    const id = await create('ev-outside');
    await call('POST', `/lxc/${id}/start`);
    const cursor = await headCursor(env.req);
    execFileSync('lxc-stop', ['-P', lxcPath(), '-n', `svc-lxc-${id}`, '-k']);
    const evs = await stateEventsUntil(env.req, 'lxc', `lxc/${id}`, cursor, (e) => e.length > 0);
    expect(evs).to.have.length(1);
    expect(evs[0].data).to.include({ state: 'STOPPED', reason: 'init-exited' });
    expect(evs[0].actor).to.equal('runtime');
    // A call after it changes the state again, reported as usual (the watch's report did not stick anything).
    await call('POST', `/lxc/${id}/start`);
    const more = await stateEventsUntil(env.req, 'lxc', `lxc/${id}`, cursor, (e) => e.length > 1);
    expect(states(more)).to.deep.equal(['STOPPED', 'RUNNING']);
  });

  it("a container frozen and thawed behind hostd's back (lxc-freeze from outside) is FROZEN, then RUNNING, with reason outside", async () => {
    const id = await create('ev-freeze');
    await call('POST', `/lxc/${id}/start`);
    const cursor = await headCursor(env.req);
    execFileSync('lxc-freeze', ['-P', lxcPath(), '-n', `svc-lxc-${id}`]);
    const frozen = await stateEventsUntil(env.req, 'lxc', `lxc/${id}`, cursor, (e) => e.length > 0);
    expect(frozen[0].data).to.include({ state: 'FROZEN', reason: 'outside' });
    execFileSync('lxc-unfreeze', ['-P', lxcPath(), '-n', `svc-lxc-${id}`]);
    const thawed = await stateEventsUntil(env.req, 'lxc', `lxc/${id}`, cursor, (e) => e.length > 1);
    expect(states(thawed)).to.deep.equal(['FROZEN', 'RUNNING']);
    expect(thawed[1].data).to.include({ reason: 'outside' });
    await call('POST', `/lxc/${id}/stop`);
  });

  it('a container whose init exits on its own is STOPPED with reason init-exited and the exit status LXC sent', async () => {
    const id = await create('ev-init');
    await call('POST', `/lxc/${id}/start`);
    const cursor = await headCursor(env.req);
    process.kill(initPid(dataDir, id), 'SIGKILL');
    const evs = await stateEventsUntil(env.req, 'lxc', `lxc/${id}`, cursor, (e) => e.length > 0);
    expect(evs).to.have.length(1);
    expect(evs[0].data).to.include({ state: 'STOPPED', reason: 'init-exited' });
    expect(evs[0].data.exit_status, JSON.stringify(evs[0].data)).to.be.a('number');
    const r = await env.req('GET', `/lxc/${id}`);
    expect(r.body.container.state).to.equal('stopped');
  });

  it('a change while the daemon was down is reported once at the next open, and not again at the one after', async () => {
    const id = await create('ev-down');
    await call('POST', `/lxc/${id}/start`);
    const cursor = await headCursor(env.req);
    await env.d.stop();
    execFileSync('lxc-stop', ['-P', lxcPath(), '-n', `svc-lxc-${id}`, '-k']);
    await eventually(() => infoState(id) === 'STOPPED', 30_000, 'the container to stop');
    env = await lxcEnv({ dataDir, poolDirs: pools, imageId: null });
    const evs = await stateEventsUntil(env.req, 'lxc', `lxc/${id}`, cursor, (e) => e.length > 0);
    expect(evs).to.have.length(1);
    expect(evs[0].data).to.include({ state: 'STOPPED', reason: 'found-at-open' });
    const after = await headCursor(env.req);
    await env.d.stop();
    env = await lxcEnv({ dataDir, poolDirs: pools, imageId: null });
    // Open has reported what it found before the daemon answers: nothing new by then.
    expect(await stateEventsNow(env.req, 'lxc', `lxc/${id}`, after)).to.deep.equal([]);
  });

  /** A daemon on the same data dir that stops for good at `step` (`lxc.<step>`). */
  async function bootPaused(step: string): Promise<void> {
    await env.d.stop();
    env = await lxcEnv({ dataDir, poolDirs: pools, imageId: null, env: { HOSTD_TEST_PAUSE_AT: `lxc.${step}` } });
  }
  async function killAndRestart(step: string): Promise<void> {
    await eventually(() => env.d.logs.find((l) => isPauseLine(l, `lxc.${step}`)), 120_000, `the pause at ${step}`);
    await env.d.kill();
    env = await lxcEnv({ dataDir, poolDirs: pools, imageId: null });
  }

  it("killed right after a create's commit: `created` is in the log once after the restart", async () => {
    const cursor = await headCursor(env.req);
    await bootPaused('create.committed');
    void env.req('POST', '/lxc', { name: 'ev-crash-create', template: 'bb', lxcid: 610 }).catch(() => undefined);
    await killAndRestart('create.committed');
    expect((await env.req('GET', '/lxc/610')).status, 'the create was committed').to.equal(200);
    // Open has reported what it found before the daemon answers.
    expect(states(await stateEventsNow(env.req, 'lxc', 'lxc/610', cursor))).to.deep.equal(['created']);
  });

  it("killed right after a start's report was written: RUNNING is in the log once after the restart", async () => {
    const id = await create('ev-crash-start');
    const cursor = await headCursor(env.req);
    await bootPaused('state.written');
    void env.req('POST', `/lxc/${id}/start`).catch(() => undefined);
    await killAndRestart('state.written');
    expect(infoState(id)).to.equal('RUNNING');
    expect(states(await stateEventsNow(env.req, 'lxc', `lxc/${id}`, cursor))).to.deep.equal(['RUNNING']);
    await call('POST', `/lxc/${id}/stop`);
  });
});
