import { expect } from 'chai';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { AppsContext } from '../../../daemon/apps/context.js';
import { appGuests } from '../../../daemon/apps/guests.js';
import { appsHandlers } from '../../../daemon/apps/handlers.js';
import { openApps } from '../../../daemon/apps/index.js';
import { AppRecords } from '../../../daemon/apps/records.js';
import { TemplateCatalog } from '../../../daemon/apps/templates.js';
import type { CallContext } from '../../../daemon/lib/caller.js';
import type { FolderRef } from '../../../daemon/domain.js';
import { notFound } from '../../../daemon/lib/errors.js';
import { testPause } from '../../../daemon/lib/test-pause.js';
import { Store } from '../../../daemon/store/store.js';
import { TaskRunner } from '../../../daemon/tasks/runner.js';
import { FakeAppsDriver } from '../../helpers/apps-fake-driver.js';
import { rejectsApi } from '../../helpers/expect.js';

/**
 * The apps domain's rules over a fake driver (no engine): the guests port,
 * what an install asks of the runtime and in which order, that a bad folder
 * leaves nothing behind, and that a stored compose file refused by a rule
 * added since is kept, listed and refused at every start or apply. The same
 * operations against a real engine are test/runtime/apps/operations.test.ts.
 */
describe('apps domain rules (fake driver)', () => {
  let dir: string;
  let store: Store;
  let driver: FakeAppsDriver;
  let c: AppsContext;
  let svc: ReturnType<typeof appsHandlers>;
  let tasks: TaskRunner;
  let folders: FolderRef[];
  const open = async (pools = [{ id: 'p', path: path.join(dir, 'pool') }]) => {
    const records = new AppRecords(store);
    await records.load();
    c = await openApps({
      driver,
      records,
      catalog: new TemplateCatalog(undefined),
      pools,
      folders: () => ({
        folder: (id) =>
          folders.find((f) => f.folder_id === id) ??
          (() => {
            throw notFound(`folder '${id}' not found`);
          })(),
        list: () => folders,
      }),
      tasks,
      log: pino({ level: 'silent' }),
      dataDir: path.join(dir, 'data'),
      settings: { publishAddress: '127.0.0.1' },
      pause: testPause({}, 'apps', pino({ level: 'silent' })),
    });
    svc = appsHandlers(c);
  };

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-apps-svc-'));
    fs.mkdirSync(path.join(dir, 'pool'));
    store = await Store.open(path.join(dir, 'db'));
    folders = [];
    driver = new FakeAppsDriver();
    driver.images.add('img:1');
    tasks = new TaskRunner(store, 'n1');
    await open();
  });
  afterEach(async () => {
    await tasks.drain();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const ctx = {
    note() {},
    caller: { tokenId: 't1', tokenName: 't', scopes: ['apps.manage'], transport: 'api', origin: 'n1' },
    requestId: 'r1',
  } satisfies CallContext;

  it('offers apps to the guests port with their published addresses, and state unknown when the engine is down', async () => {
    const res = await svc.apps_create({ template_id: 'custom', name: 'Web', compose_content: 'services:\n  web:\n    image: img:1\n' }, ctx);
    expect(res.task).to.equal(null);
    expect(driver.calls).to.deep.equal(['up hostd_web_app start']);
    driver.list = [
      {
        container_id: 'c1',
        name: 'hostd_web_app-web-1',
        image: 'img:1',
        state: 'running',
        status: 'Up',
        created_at: '',
        project: 'hostd_web_app',
        service: 'web',
        app_id: 'web',
        generation: 1,
        ports: [
          { host_ip: '0.0.0.0', host_port: 8080, container_port: 80, protocol: 'tcp' },
          { host_ip: '::', host_port: 8080, container_port: 80, protocol: 'tcp' },
          { host_ip: '10.0.0.5', host_port: 9000, container_port: 90, protocol: 'tcp' },
        ],
      },
    ];
    expect(await appGuests(c)).to.deep.equal([
      {
        kind: 'app',
        id: 'web',
        name: 'Web',
        state: 'running',
        running: true,
        cpu_cores: 0,
        memory_mb: 0,
        addresses: ['127.0.0.1:8080', '[::1]:8080', '10.0.0.5:9000'],
      },
    ]);
    driver.reachable = false;
    expect((await appGuests(c))[0]).to.deep.include({ state: 'unknown', running: false, addresses: [] });
  });

  it('missing images make the install a task that pulls, checks with compose first, and then starts', async () => {
    const res = await svc.apps_create({ template_id: 'custom', name: 'p', compose_content: 'services:\n  a:\n    image: new:2\n' }, ctx);
    expect(res.app.state).to.equal('installing');
    const done = await tasks.settled(res.task!.task_id);
    expect(done.state, done.error ?? '').to.equal('succeeded');
    expect(driver.calls).to.deep.equal(['check hostd_p_app', 'pull new:2', 'up hostd_p_app start']);
    await rejectsApi(svc.apps_move({ app_id: 'p', storage_id: 'p' }, ctx), 409, "app 'p' is already in storage pool 'p'");
  });

  it('a folder that does not exist is 404 and leaves nothing behind', async () => {
    await rejectsApi(
      svc.apps_create(
        {
          template_id: 'custom',
          name: 'f',
          compose_content: 'services:\n  a:\n    image: img:1\n',
          folder_assignments: [{ folder_id: 'f_x', container_path: '/x' }],
        },
        ctx,
      ),
      404,
      "folder 'f_x' not found",
    );
    expect((await svc.apps_list({}, ctx)).apps).to.deep.equal([]);
    expect(fs.existsSync(path.join(dir, 'pool', '.hostd-apps', 'f'))).to.equal(false);
  });

  it('folder assignments pass the host-path rule every domain shares, on the real path: no directory hostd keeps, no pool root', async () => {
    const media = path.join(dir, 'pool', 'media');
    fs.mkdirSync(path.join(media, '.hostd-apps', 'other'), { recursive: true });
    fs.mkdirSync(path.join(media, 'films'));
    // Through a link too: the rule judges where the sub-path really leads.
    fs.symlinkSync('.hostd-apps/other', path.join(media, 'innocent'));
    folders = [
      { folder_id: 'f_media', name: 'media', storage_id: 'p', path: media },
      { folder_id: 'f_pool', name: 'whole pool', storage_id: 'p', path: path.join(dir, 'pool') },
    ];
    const content = 'services:\n  a:\n    image: img:1\n';
    const rule = 'apps may mount only managed folders, never a storage pool root or a directory hostd keeps for itself';
    const install = (a: Record<string, unknown>) =>
      svc.apps_create(
        { template_id: 'custom', name: 'm', compose_content: content, folder_assignments: [{ folder_id: 'f_media', container_path: '/m', ...a }] },
        ctx,
      );
    await rejectsApi(
      install({ sub_path: '.hostd-apps/other' }),
      400,
      `argument 'folder_assignments[0]' (folder 'f_media', sub_path '.hostd-apps/other') is inside a directory hostd keeps for itself ('.hostd-apps'): ${rule}`,
    );
    await rejectsApi(
      install({ sub_path: 'innocent' }),
      400,
      `argument 'folder_assignments[0]' (folder 'f_media', sub_path 'innocent') is inside a directory hostd keeps for itself ('.hostd-apps'): ${rule}`,
    );
    await rejectsApi(
      install({ folder_id: 'f_pool' }),
      400,
      `argument 'folder_assignments[0]' (folder 'f_pool') is a storage pool root or holds one (every domain keeps its files there): ${rule}`,
    );
    expect(driver.calls).to.deep.equal([]);
    expect((await svc.apps_list({}, ctx)).apps).to.deep.equal([]);
    // A directory of the folder is fine.
    const ok = await install({ sub_path: 'films' });
    expect(ok.app).to.deep.include({ app_id: 'm', state: 'not_created' });
    expect(driver.calls).to.deep.equal(['up hostd_m_app start']);
  });

  it('an app of the first naming scheme (project hostd-<id>) keeps its project until a change of its definition renames it', async () => {
    await svc.apps_create({ template_id: 'custom', name: 'old', compose_content: 'services:\n  a:\n    image: img:1\n' }, ctx);
    // As an older version stored it, with its containers on the engine.
    const rec = store.sub<any>('apps');
    await rec.put('old', { ...(await rec.get('old')), project: 'hostd-old' });
    driver.list = [
      {
        container_id: 'c1',
        name: 'hostd-old-a-1',
        image: 'img:1',
        state: 'running',
        status: 'Up',
        created_at: '',
        project: 'hostd-old',
        service: 'a',
        app_id: 'old',
        generation: 1,
        ports: [],
      },
    ];
    await open();
    driver.calls = [];
    expect((await svc.apps_actions({ app_id: 'old', action: 'restart' }, ctx)).app).to.deep.include({ project: 'hostd-old', state: 'running' });
    expect(driver.calls).to.deep.equal(['restart hostd-old']);
    // Sending the current assignments again is the rename: the old project goes (its data stays), the new one comes up.
    driver.calls = [];
    const res = await svc.apps_folders_update({ app_id: 'old', folder_assignments: [] }, ctx);
    expect(res.app).to.deep.include({ project: 'hostd_old_app', generation: 2 });
    expect(driver.calls).to.deep.equal(['remove hostd-old', 'up hostd_old_app start']);
    expect(fs.existsSync(path.join(dir, 'pool', '.hostd-apps', 'old'))).to.equal(true);
  });

  it('a change a restart interrupted and start-up cannot settle (compose missing) leaves that app 503 until it can, then settles it', async () => {
    await svc.apps_create({ template_id: 'custom', name: 'w', compose_content: 'services:\n  a:\n    image: img:1\n' }, ctx);
    await svc.apps_create({ template_id: 'custom', name: 'other', compose_content: 'services:\n  a:\n    image: img:1\n' }, ctx);
    // What a kill in the middle of `stop` leaves: the intent open, the record still saying running.
    const w = c.records.get('w')!;
    await c.records.begin('w', { op: 'action', app_id: 'w', action: 'stop', after: { ...w, desired_state: 'stopped' } });
    driver.composeMissing = true;
    driver.calls = [];
    await open();
    const why = "app 'w' has a change interrupted by a restart that cannot be settled yet: docker compose is not available: compose v2 is not installed (fake)";
    // Uninstalling needs only the engine, which answers: the open change is what is in the way.
    await rejectsApi(svc.apps_delete({ app_id: 'w' }, ctx), 503, why);
    expect((await svc.apps_list({}, ctx)).apps.find((a) => a.app_id === 'w')).to.deep.include({ desired_state: 'running' });
    // Another app is not held up by it.
    expect(await svc.apps_delete({ app_id: 'other' }, ctx)).to.deep.include({ app_id: 'other', deleted: true });
    expect(driver.calls).to.deep.equal(['remove hostd_other_app']);
    // Compose is back: the next call settles the stop first (done again), then does its own work.
    driver.composeMissing = false;
    driver.calls = [];
    expect(await svc.apps_delete({ app_id: 'w' }, ctx)).to.deep.include({ app_id: 'w', deleted: true });
    expect(driver.calls).to.deep.equal(['stop hostd_w_app', 'remove hostd_w_app']);
    expect(await c.records.journal.open()).to.deep.equal([]);
  });

  it('an app whose stored compose file breaks a rule added since (as an upgrade finds it) is kept, listed, and refused with 409 at every start or apply', async () => {
    await svc.apps_create({ template_id: 'custom', name: 'old', compose_content: 'services:\n  a:\n    image: img:1\n' }, ctx);
    fs.mkdirSync(path.join(dir, 'pool2'));
    // What an older version stored: a log driver that is refused now.
    const content = 'services:\n  a:\n    image: img:1\n    logging: {driver: syslog, options: {syslog-address: "unix:///var/run/docker.sock"}}\n';
    const sha = crypto.createHash('sha256').update(content).digest('hex');
    const rec = store.sub<any>('apps');
    await rec.put('old', { ...(await rec.get('old')), compose_sha256: sha });
    await store.sub<any>('apps_content').put('old', { content, sha256: sha });
    // Opening the domain again is what an upgrade does: the start-up check finds the file.
    await open([
      { id: 'p', path: path.join(dir, 'pool') },
      { id: 'q', path: path.join(dir, 'pool2') },
    ]);
    driver.calls = [];
    const why =
      "compose_content: services.a.logging.driver is refused: 'syslog' sends the log outside the engine's own disk (accepted: json-file, local, none)";
    const refused = `app 'old' is refused: its stored compose file breaks a rule added since it was installed (${why}); nothing was changed or removed: replace the file with PATCH /apps/old/compose`;
    expect((await svc.apps_list({}, ctx)).apps[0]).to.deep.include({ app_id: 'old', refused: why, compose_sha256: sha });
    await rejectsApi(svc.apps_actions({ app_id: 'old', action: 'start' }, ctx), 409, refused);
    await rejectsApi(svc.apps_actions({ app_id: 'old', action: 'restart' }, ctx), 409, refused);
    await rejectsApi(svc.apps_folders_update({ app_id: 'old', folder_assignments: [] }, ctx), 409, refused);
    await rejectsApi(svc.apps_move({ app_id: 'old', storage_id: 'q' }, ctx), 409, refused);
    // Nothing reached the engine, and nothing was removed.
    expect(driver.calls).to.deep.equal([]);
    expect(fs.existsSync(path.join(dir, 'pool', '.hostd-apps', 'old'))).to.equal(true);
    // Stopping is always possible; new content that passes clears the refusal.
    await svc.apps_actions({ app_id: 'old', action: 'stop' }, ctx);
    const fixed = await svc.apps_compose_update({ app_id: 'old', compose_content: 'services:\n  a:\n    image: img:1\n    logging: {driver: local}\n' }, ctx);
    expect(fixed.app.refused).to.equal(null);
    await svc.apps_actions({ app_id: 'old', action: 'start' }, ctx);
    expect(driver.calls).to.deep.equal(['stop hostd_old_app', 'up hostd_old_app create', 'up hostd_old_app start']);
  });
});
