/**
 * `apps.state` events against a real Docker engine: each state change a call
 * makes once, by the caller, and `uninstalled`; an app container killed
 * behind hostd's back (as a user's `docker kill` would) reported by the
 * driver's engine event watch as `partial`, then `stopped`, naming the
 * container and its exit code; a change while the daemon was down
 * reported once at the next open; and hostd killed (SIGKILL) right after a
 * change was stored (an install, a stop, a move's task): its event is in the
 * log once after the restart (it is written in the change's batch), neither
 * lost nor repeated.
 */
import { expect } from 'chai';
import { appsRuntime, missingRuntime, stopEngines } from '../../helpers/apps-engine.js';
import { APP_SCOPES, labDaemon, startLab, type AppsLab } from '../../helpers/apps-lab.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { COMPOSE } from '../../../daemon/apps/driver.js';
import { eventually, tempDir, type TestDaemon } from '../../helpers/daemon.js';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';
import { headCursor, stateEventsNow, stateEventsUntil, type StateEvent } from '../../helpers/state-events.js';

const API = '/api/v1';

describe('apps on a real Docker engine: apps.state events', function () {
  this.timeout(180_000);
  let lab: AppsLab;
  let d: TestDaemon;
  let tok: string;
  let dataDir: string;

  const req = (method: string, p: string, body?: unknown) => d.request(method, `${API}${p}`, { token: tok, body });
  const states = (evs: StateEvent[]) => evs.map((e) => e.data.state);
  /** Two services that run until killed (no restart policy: a killed one stays down). */
  const twoSleepers = () => `services:
  a:
    image: ${lab.image}
    init: true
    command: ["sleep", "3600"]
  b:
    image: ${lab.image}
    init: true
    command: ["sleep", "3600"]
`;
  async function install(name: string): Promise<any> {
    const r = await req('POST', '/apps', { template_id: 'custom', name, compose_content: twoSleepers() });
    expect(r.status, r.text).to.equal(201);
    expect(r.body.task, 'the test image is local: no pull, no task').to.equal(null);
    return r.body.app;
  }
  async function action(id: string, a: string): Promise<void> {
    const r = await req('POST', `/apps/${id}/actions`, { action: a });
    expect(r.status, r.text).to.equal(200);
  }
  async function restartDaemon(): Promise<void> {
    await d.stop();
    d = await labDaemon(lab, { dataDir });
    tok = await d.token(`apps-ev-${Date.now()}`, APP_SCOPES);
  }

  before(async function () {
    await requireRuntime(this, 'apps', appsRuntime(), { need: [COMPOSE], also: missingRuntime });
    lab = await startLab();
    dataDir = tempDir('hostd-apps-ev-');
    d = await labDaemon(lab, { dataDir });
    tok = await d.token('apps-ev', APP_SCOPES);
  });

  after(async () => {
    if (!lab) return;
    await d?.stop();
    await stopEngines();
  });

  it('reports each change a call makes once, in order, by the caller: running, stopped, running, uninstalled', async () => {
    const cursor = await headCursor(req);
    const app = await install('ev-calls');
    await action(app.app_id, 'stop');
    await action(app.app_id, 'stop'); // already stopped: no change, no event
    await action(app.app_id, 'start');
    const del = await req('DELETE', `/apps/${app.app_id}`);
    expect(del.status, del.text).to.equal(200);
    const evs = await stateEventsUntil(req, 'apps', `apps/${app.app_id}`, cursor, (e) => states(e).includes('uninstalled'));
    expect(states(evs)).to.deep.equal(['running', 'stopped', 'running', 'uninstalled']);
    for (const e of evs) {
      expect(e).to.include({ type: 'apps.state', resource: `apps/${app.app_id}`, actor: 'apps-ev' });
      expect(e.data.reason).to.equal(undefined);
    }
  });

  it("an app container killed behind hostd's back: partial, then stopped, each naming the container and its exit code", async () => {
    const app = await install('ev-kill');
    const [a, b] = app.services as Array<{ service: string; name: string }>;
    const cursor = await headCursor(req);
    await lab.engine.docker(['kill', a.name]);
    const first = await stateEventsUntil(req, 'apps', `apps/${app.app_id}`, cursor, (e) => e.length > 0);
    expect(first).to.have.length(1);
    expect(first[0].actor).to.equal('runtime');
    expect(first[0].data).to.deep.include({ state: 'partial', reason: 'outside', container: a.name, action: 'die', exit_code: 137 });
    await lab.engine.docker(['kill', b.name]);
    const both = await stateEventsUntil(req, 'apps', `apps/${app.app_id}`, cursor, (e) => e.length > 1);
    expect(states(both)).to.deep.equal(['partial', 'stopped']);
    expect(both[1].data).to.deep.include({ state: 'stopped', container: b.name, exit_code: 137 });
    const view = (await req('GET', '/apps')).body.apps.find((x: { app_id: string }) => x.app_id === app.app_id);
    expect(view.state).to.equal('stopped');
    expect((await req('DELETE', `/apps/${app.app_id}`)).status).to.equal(200);
  });

  it('a change while the daemon was down is reported once at the next open, and not again at the one after', async () => {
    const app = await install('ev-down');
    const cursor = await headCursor(req);
    await d.stop();
    for (const s of app.services as Array<{ name: string }>) await lab.engine.docker(['kill', s.name]);
    d = await labDaemon(lab, { dataDir });
    tok = await d.token(`apps-ev-${Date.now()}`, APP_SCOPES);
    const evs = await stateEventsUntil(req, 'apps', `apps/${app.app_id}`, cursor, (e) => e.length > 0);
    expect(evs).to.have.length(1);
    expect(evs[0].data).to.include({ state: 'stopped', reason: 'found-at-open' });
    const after = await headCursor(req);
    await restartDaemon();
    expect(await stateEventsNow(req, 'apps', `apps/${app.app_id}`, after)).to.deep.equal([]);
    expect((await req('DELETE', `/apps/${app.app_id}`)).status).to.equal(200);
  });

  /** Restarts on the same data dir with a daemon that stops for good at `apps.<step>`; the name of the token it calls with. */
  async function bootPaused(step: string): Promise<string> {
    await d.stop();
    d = await labDaemon(lab, { dataDir, env: { HOSTD_TEST_PAUSE_AT: `apps.${step}` } });
    const name = `apps-ev-${Date.now()}`;
    tok = await d.token(name, APP_SCOPES);
    return name;
  }
  async function killAndRestart(step: string): Promise<void> {
    await eventually(() => d.logs.find((l) => isPauseLine(l, `apps.${step}`)), 60_000, `the pause at ${step}`);
    await d.kill();
    d = await labDaemon(lab, { dataDir });
    tok = await d.token(`apps-ev-${Date.now()}`, APP_SCOPES);
  }
  const appNamed = async (name: string) => ((await req('GET', '/apps')).body.apps as Array<{ app_id: string; name: string }>).find((a) => a.name === name);

  it("killed right after an install's commit: `running` is in the log once after the restart", async () => {
    const cursor = await headCursor(req);
    await bootPaused('install.committed');
    void req('POST', '/apps', { template_id: 'custom', name: 'ev-crash-install', compose_content: twoSleepers() }).catch(() => undefined);
    await killAndRestart('install.committed');
    const app = await appNamed('ev-crash-install');
    expect(app, 'the install was committed').to.not.equal(undefined);
    // Open has reported what it found before the daemon answers.
    expect(states(await stateEventsNow(req, 'apps', `apps/${app!.app_id}`, cursor))).to.deep.equal(['running']);
    expect((await req('DELETE', `/apps/${app!.app_id}`)).status).to.equal(200);
  });

  it("killed right after a stop's report was written: `stopped` is in the log once after the restart", async () => {
    const app = await install('ev-crash-stop');
    const cursor = await headCursor(req);
    await bootPaused('state.written');
    void req('POST', `/apps/${app.app_id}/actions`, { action: 'stop' }).catch(() => undefined);
    await killAndRestart('state.written');
    expect(states(await stateEventsNow(req, 'apps', `apps/${app.app_id}`, cursor))).to.deep.equal(['stopped']);
    expect((await req('DELETE', `/apps/${app.app_id}`)).status).to.equal(200);
  });

  it("a move's task killed right after its last commit: `running`, by the caller, was stored with it; the restart reports nothing more", async () => {
    const app = await install('ev-crash-move');
    const cursor = await headCursor(req);
    const caller = await bootPaused('move.committed');
    const moving = await req('POST', `/apps/${app.app_id}/move`, { storage_id: 'p2' });
    expect(moving.status, moving.text).to.equal(200);
    await eventually(() => d.logs.find((l) => isPauseLine(l, 'apps.move.committed')), 120_000, 'the pause after the move was committed');
    // The task still holds the app; its commit already carries the state the app settles in.
    const paused = await stateEventsNow(req, 'apps', `apps/${app.app_id}`, cursor);
    expect(paused.map((e) => [e.data.state, e.actor])).to.deep.equal([
      ['moving', caller],
      ['running', caller],
    ]);
    await d.kill();
    d = await labDaemon(lab, { dataDir });
    tok = await d.token(`apps-ev-${Date.now()}`, APP_SCOPES);
    const after = await appNamed('ev-crash-move');
    expect(after).to.deep.include({ storage_id: 'p2' });
    expect(states(await stateEventsNow(req, 'apps', `apps/${app.app_id}`, cursor))).to.deep.equal(['moving', 'running']);
    expect((await req('DELETE', `/apps/${app.app_id}`)).status).to.equal(200);
  });
});
