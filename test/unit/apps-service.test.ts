import { expect } from 'chai';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { AppRecords } from '../../daemon/apps/records.js';
import { AppsService } from '../../daemon/apps/service.js';
import { TemplateCatalog } from '../../daemon/apps/templates.js';
import { notFound } from '../../daemon/lib/errors.js';
import { noNotes } from '../../daemon/lib/caller.js';
import { Store } from '../../daemon/store/store.js';
import { TaskRunner } from '../../daemon/tasks/runner.js';
import { FakeAppsDriver } from '../helpers/apps-fake-driver.js';
import { rejectsApi } from '../helpers/expect.js';

describe('apps service rules (fake driver)', () => {
  let dir: string;
  let store: Store;
  let driver: FakeAppsDriver;
  let svc: AppsService;
  let tasks: TaskRunner;
  const open = async () => {
    const records = new AppRecords(store);
    await records.load();
    return new AppsService({
      driver, records, catalog: new TemplateCatalog(undefined), pools: [{ id: 'p', path: path.join(dir, 'pool') }, { id: 'q', path: path.join(dir, 'pool2') }],
      folders: () => ({ folder: (id) => { throw notFound(`folder '${id}' not found`); }, list: () => [] }),
      tasks, log: pino({ level: 'silent' }), composeRoot: path.join(dir, 'apps'), settings: { publishAddress: '127.0.0.1' },
    });
  };

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-apps-svc-'));
    fs.mkdirSync(path.join(dir, 'pool'));
    store = await Store.open(path.join(dir, 'db'));
    const records = new AppRecords(store);
    await records.load();
    driver = new FakeAppsDriver();
    driver.images.add('img:1');
    tasks = new TaskRunner(store, 'n1');
    svc = new AppsService({
      driver, records, catalog: new TemplateCatalog(undefined), pools: [{ id: 'p', path: path.join(dir, 'pool') }],
      folders: () => ({ folder: (id) => { throw notFound(`folder '${id}' not found`); }, list: () => [] }),
      tasks, log: pino({ level: 'silent' }), composeRoot: path.join(dir, 'apps'), settings: { publishAddress: '127.0.0.1' },
    });
  });
  afterEach(async () => {
    await tasks.drain();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const ctx = { ...noNotes, caller: { tokenName: 't' } };

  it('offers apps to the guests port with their published addresses, and state unknown when the engine is down', async () => {
    const res = await svc.create({ template_id: 'custom', name: 'Web', compose_content: 'services:\n  web:\n    image: img:1\n' }, ctx);
    expect(res.task).to.equal(null);
    expect(driver.calls).to.deep.equal(['up hostd-web start']);
    driver.list = [{
      container_id: 'c1', name: 'hostd-web-web-1', image: 'img:1', state: 'running', status: 'Up', created_at: '', project: 'hostd-web', service: 'web',
      app_id: 'web', generation: 1, ports: [{ host_ip: '0.0.0.0', host_port: 8080, container_port: 80, protocol: 'tcp' }, { host_ip: '::', host_port: 8080, container_port: 80, protocol: 'tcp' }, { host_ip: '10.0.0.5', host_port: 9000, container_port: 90, protocol: 'tcp' }],
    }];
    expect(await svc.guests()).to.deep.equal([{ kind: 'app', id: 'web', name: 'Web', state: 'running', running: true, cpu_cores: 0, memory_mb: 0, addresses: ['127.0.0.1:8080', '[::1]:8080', '10.0.0.5:9000'] }]);
    driver.reachable = false;
    expect((await svc.guests())[0]).to.deep.include({ state: 'unknown', running: false, addresses: [] });
  });

  it('missing images make the install a task that pulls, checks with compose first, and then starts', async () => {
    const res = await svc.create({ template_id: 'custom', name: 'p', compose_content: 'services:\n  a:\n    image: new:2\n' }, ctx);
    expect(res.app.state).to.equal('installing');
    const done = await tasks.settled(res.task!.task_id);
    expect(done.state, done.error ?? '').to.equal('succeeded');
    expect(driver.calls).to.deep.equal(['check hostd-p', 'pull new:2', 'up hostd-p start']);
    await rejectsApi(svc.move({ app_id: 'p', storage_id: 'p' }, ctx), 409, "app 'p' is already in storage pool 'p'");
  });

  it('a folder that does not exist is 404 and leaves nothing behind', async () => {
    await rejectsApi(svc.create({ template_id: 'custom', name: 'f', compose_content: 'services:\n  a:\n    image: img:1\n', folder_assignments: [{ folder_id: 'f_x', container_path: '/x' }] }, ctx), 404, "folder 'f_x' not found");
    expect((await svc.list()).apps).to.deep.equal([]);
    expect(fs.existsSync(path.join(dir, 'pool', '.hostd-apps', 'f'))).to.equal(false);
  });

  it('an app whose stored compose file breaks a rule added since (as an upgrade finds it) is kept, listed, and refused with 409 at every start or apply', async () => {
    await svc.create({ template_id: 'custom', name: 'old', compose_content: 'services:\n  a:\n    image: img:1\n' }, ctx);
    fs.mkdirSync(path.join(dir, 'pool2'));
    // What an older version stored: a log driver that is refused now.
    const content = 'services:\n  a:\n    image: img:1\n    logging: {driver: syslog, options: {syslog-address: "unix:///var/run/docker.sock"}}\n';
    const sha = crypto.createHash('sha256').update(content).digest('hex');
    const rec = store.sub<any>('apps');
    await rec.put('old', { ...(await rec.get('old')), compose_sha256: sha });
    await store.sub<any>('apps_content').put('old', { content, sha256: sha });
    svc = await open();
    await svc.audit();
    driver.calls = [];
    const why = "compose_content: services.a.logging.driver is refused: 'syslog' sends the log outside the engine's own disk (accepted: json-file, local, none)";
    const refused = `app 'old' is refused: its stored compose file breaks a rule added since it was installed (${why}); nothing was changed or removed: replace the file with PATCH /apps/old/compose`;
    expect((await svc.list()).apps[0]).to.deep.include({ app_id: 'old', refused: why, compose_sha256: sha });
    await rejectsApi(svc.action({ app_id: 'old', action: 'start' }, ctx), 409, refused);
    await rejectsApi(svc.action({ app_id: 'old', action: 'restart' }, ctx), 409, refused);
    await rejectsApi(svc.foldersUpdate({ app_id: 'old', folder_assignments: [] }, ctx), 409, refused);
    await rejectsApi(svc.move({ app_id: 'old', storage_id: 'q' }, ctx), 409, refused);
    // Nothing reached the engine, and nothing was removed.
    expect(driver.calls).to.deep.equal([]);
    expect(fs.existsSync(path.join(dir, 'pool', '.hostd-apps', 'old'))).to.equal(true);
    // Stopping is always possible; new content that passes clears the refusal.
    await svc.action({ app_id: 'old', action: 'stop' }, ctx);
    const fixed = await svc.composeUpdate({ app_id: 'old', compose_content: 'services:\n  a:\n    image: img:1\n    logging: {driver: local}\n' }, ctx);
    expect(fixed.app.refused).to.equal(null);
    await svc.action({ app_id: 'old', action: 'start' }, ctx);
    expect(driver.calls).to.deep.equal(['stop hostd-old', 'up hostd-old create', 'up hostd-old start']);
  });
});
