/**
 * Crash safety of the apps domain: hostd is killed (SIGKILL) at named steps of
 * install, compose update, move and uninstall (the test hook
 * HOSTD_TEST_PAUSE_AT=apps.<step> stops the change there), then started again on the same
 * data directory. After the restart the app record, its compose project on the
 * engine and its data directory agree.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { appsRuntime, missingRuntime, stopEngines } from '../../helpers/apps-engine.js';
import { APP_SCOPES, appsResultProblem, labDaemon, startLab, waitTask, webCompose, type AppsLab } from '../../helpers/apps-lab.js';
import { eventually, tempDir, type TestDaemon } from '../../helpers/daemon.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { COMPOSE } from '../../../daemon/apps/driver.js';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';

const API = '/api/v1';

describe('apps: crash safety (kill -9 at named steps)', function () {
  this.timeout(120_000);
  let lab: AppsLab;

  before(async function () {
    await requireRuntime(this, 'apps', appsRuntime(), { need: [COMPOSE], also: missingRuntime });
    lab = await startLab();
  });

  after(async () => {
    if (lab) await stopEngines();
  });

  interface Run {
    d: TestDaemon;
    tok: string;
    dataDir: string;
  }

  async function start(pauseAt?: string, dataDir = tempDir('hostd-apps-rec-')): Promise<Run> {
    const d = await labDaemon(lab, { dataDir, env: pauseAt ? { HOSTD_TEST_PAUSE_AT: `apps.${pauseAt}` } : {} });
    return { d, tok: await d.token(`t${Date.now()}`, APP_SCOPES), dataDir };
  }

  const req = async (r: Run, method: string, p: string, body?: unknown) => {
    const res = await r.d.request(method, `${API}${p}`, { token: r.tok, body });
    expect(appsResultProblem(method, p, res)).to.equal(undefined);
    return res;
  };

  /** Sends a request that will stop at the paused step, waits for the pause, and kills the daemon. */
  async function killAt(r: Run, step: string, method: string, p: string, body?: unknown): Promise<void> {
    const pending = req(r, method, p, body).catch(() => undefined);
    await eventually(() => r.d.logs.some((l) => isPauseLine(l, `apps.${step}`)), 60_000, `the daemon to pause at ${step}`);
    await r.d.kill();
    await pending;
  }

  async function install(r: Run, name: string, port: number, extra = ''): Promise<any> {
    const res = await req(r, 'POST', '/apps', { template_id: 'custom', name, compose_content: webCompose(lab.image, port, extra) });
    expect(res.status, res.text).to.equal(201);
    return res.body.app;
  }

  async function containers(project: string): Promise<Array<{ id: string; state: string; generation: string }>> {
    const out = await lab.engine.docker([
      'ps',
      '-a',
      '--filter',
      `label=com.docker.compose.project=${project}`,
      '--format',
      '{{.ID}} {{.State}} {{.Label "org.hostd.generation"}}',
    ]);
    return out.stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        const [id, state, generation] = l.split(' ');
        return { id, state, generation };
      });
  }

  async function appAfterRestart(r: Run, id: string): Promise<{ r2: Run; app: any }> {
    const r2 = await start(undefined, r.dataDir);
    const list = await req(r2, 'GET', '/apps');
    expect(list.status, list.text).to.equal(200);
    return { r2, app: list.body.apps.find((a: any) => a.app_id === id) };
  }

  /** The record, the compose project and the data agree. */
  async function expectAgree(r: Run, app: any): Promise<void> {
    const cs = await containers(app.project);
    expect(cs.length).to.be.greaterThan(0);
    for (const c of cs) expect(c.generation, 'container generation label').to.equal(String(app.generation));
    expect(fs.existsSync(app.data_dir)).to.equal(true);
    const file = JSON.parse(fs.readFileSync(path.join(r.dataDir, 'apps', app.app_id, 'compose.json'), 'utf8'));
    for (const s of Object.values(file.services) as any[]) expect(s.labels['org.hostd.generation']).to.equal(String(app.generation));
    expect(app.state).to.equal(app.desired_state === 'running' ? 'running' : 'stopped');
  }

  it('install killed after the containers started: rolled back (no record, no containers, no data)', async () => {
    const r = await start('install.after-up');
    await killAt(r, 'install.after-up', 'POST', '/apps', {
      template_id: 'custom',
      name: 'crash-install',
      compose_content: webCompose(lab.image, 18200, '    volumes: ["./d:/d"]\n'),
    });
    const dataDir = path.join(lab.pools.p1, '.hostd-apps', 'crash-install');
    expect((await containers('hostd_crash-install_app')).length, 'containers were running when hostd died').to.equal(1);
    const { r2, app } = await appAfterRestart(r, 'crash-install');
    expect(app).to.equal(undefined);
    expect(await containers('hostd_crash-install_app')).to.deep.equal([]);
    expect(fs.existsSync(dataDir)).to.equal(false);
    expect(fs.existsSync(path.join(r.dataDir, 'apps', 'crash-install'))).to.equal(false);
    // The id is free again.
    const again = await install(r2, 'crash-install', 18200);
    expect(again.state).to.equal('running');
    expect((await req(r2, 'DELETE', '/apps/crash-install')).status).to.equal(200);
    await r2.d.stop();
  });

  for (const step of ['update.after-files', 'update.after-up']) {
    it(`compose update killed at ${step}: finished at restart (new content, record and containers at generation 2)`, async () => {
      const id = `crash-${step.replace('.', '-')}`;
      const r = await start(step);
      const app = await install(r, id, 18201);
      expect(app.generation).to.equal(1);
      const next = webCompose(lab.image, 18202);
      await killAt(r, step, 'PATCH', `/apps/${id}/compose`, { compose_content: next });
      const { r2, app: after } = await appAfterRestart(r, id);
      expect(after).to.deep.include({ generation: 2, state: 'running' });
      expect(after.ports.map((p: any) => p.host_port)).to.deep.equal([18202]);
      await expectAgree(r2, after);
      const crypto = await import('node:crypto');
      expect(after.compose_sha256).to.equal(crypto.createHash('sha256').update(next).digest('hex'));
      expect((await req(r2, 'DELETE', `/apps/${id}`)).status).to.equal(200);
      await r2.d.stop();
    });
  }

  it('move killed after the copy, before the switch: the app stays in its pool and runs; the copy is gone', async () => {
    const id = 'crash-move-copy';
    const r = await start('move.after-copy');
    const app = await install(r, id, 18203, '    volumes: ["./keep:/keep"]\n');
    fs.writeFileSync(path.join(app.data_dir, 'keep', 'f'), 'data');
    const moving = await req(r, 'POST', `/apps/${id}/move`, { storage_id: 'p2' });
    expect(moving.status).to.equal(200);
    await eventually(() => r.d.logs.some((l) => isPauseLine(l, 'apps.move.after-copy')), 60_000, 'the move to pause');
    await r.d.kill();
    const target = path.join(lab.pools.p2, '.hostd-apps', id);
    expect(fs.existsSync(target), 'the copy was in place when hostd died').to.equal(true);
    const { r2, app: after } = await appAfterRestart(r, id);
    expect(after).to.deep.include({ storage_id: 'p1', data_dir: app.data_dir, generation: 1, task_id: null });
    await expectAgree(r2, after);
    expect(fs.existsSync(target)).to.equal(false);
    expect(fs.readFileSync(path.join(app.data_dir, 'keep', 'f'), 'utf8')).to.equal('data');
    const task = await waitTask(r2.d, r2.tok, moving.body.task.task_id);
    expect(task).to.include({ state: 'failed', error: 'interrupted by a daemon restart' });
    expect((await req(r2, 'DELETE', `/apps/${id}`)).status).to.equal(200);
    await r2.d.stop();
  });

  it('move killed after the switch: the app runs from its new pool; the old directory is gone', async () => {
    const id = 'crash-move-switch';
    const r = await start('move.after-switch');
    const app = await install(r, id, 18204, '    volumes: ["./keep:/keep"]\n');
    fs.writeFileSync(path.join(app.data_dir, 'keep', 'f'), 'data');
    const moving = await req(r, 'POST', `/apps/${id}/move`, { storage_id: 'p2' });
    expect(moving.status).to.equal(200);
    await eventually(() => r.d.logs.some((l) => isPauseLine(l, 'apps.move.after-switch')), 60_000, 'the move to pause');
    await r.d.kill();
    const target = path.join(lab.pools.p2, '.hostd-apps', id);
    const { r2, app: after } = await appAfterRestart(r, id);
    expect(after).to.deep.include({ storage_id: 'p2', data_dir: target, generation: 2, task_id: null });
    await expectAgree(r2, after);
    expect(fs.existsSync(app.data_dir)).to.equal(false);
    expect(fs.readFileSync(path.join(target, 'keep', 'f'), 'utf8')).to.equal('data');
    expect((await req(r2, 'DELETE', `/apps/${id}`)).status).to.equal(200);
    await r2.d.stop();
  });

  it('uninstall killed after its intent: finished at restart', async () => {
    const id = 'crash-delete';
    const r = await start('delete.after-intent');
    const app = await install(r, id, 18205);
    await killAt(r, 'delete.after-intent', 'DELETE', `/apps/${id}`);
    const { r2, app: after } = await appAfterRestart(r, id);
    expect(after).to.equal(undefined);
    expect(await containers(app.project)).to.deep.equal([]);
    expect(fs.existsSync(app.data_dir)).to.equal(false);
    await r2.d.stop();
  });
});
