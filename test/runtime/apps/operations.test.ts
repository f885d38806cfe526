/**
 * Apps against a real Docker engine (a private dockerd in its own network and
 * mount namespaces) and compose v2, through the real daemon API.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { appsRuntime, hostState, missingRuntime, stopEngines, testRootfsTar, type HostState } from '../../helpers/apps-engine.js';
import { APP_SCOPES, appsResultProblem, fetchInNetns, labDaemon, startLab, waitTask, webCompose, type AppsLab } from '../../helpers/apps-lab.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { COMPOSE } from '../../../daemon/apps/driver.js';
import { startRegistry, type TestRegistry } from '../../helpers/apps-registry.js';
import { hostctl, startDaemon, type TestDaemon } from '../../helpers/daemon.js';

const API = '/api/v1';

describe('apps on a real Docker engine', function () {
  this.timeout(120_000);
  let lab: AppsLab;
  let d: TestDaemon;
  let tok: string;
  let hostBefore: HostState;

  /** Every answer this suite gets is checked against the operation's result schema. */
  const req = async (method: string, p: string, body?: unknown) => {
    const r = await d.request(method, `${API}${p}`, { token: tok, body });
    expect(appsResultProblem(method, p, r)).to.equal(undefined);
    return r;
  };
  const expectError = (r: { status: number; body: any; text: string }, status: number, error: string) => {
    expect(r.status, r.text).to.equal(status);
    expect(r.body).to.deep.equal({ error });
  };
  const install = async (body: Record<string, unknown>) => {
    const r = await req('POST', '/apps', body);
    expect(r.status, r.text).to.equal(201);
    return r.body;
  };
  const getApp = async (id: string) => {
    const r = await req('GET', '/apps');
    expect(r.status).to.equal(200);
    return r.body.apps.find((a: any) => a.app_id === id);
  };
  const folder = async (name: string, pool = 'p1') => {
    const r = await req('POST', '/folders', { storage_id: pool, name });
    expect(r.status, r.text).to.equal(201);
    return r.body.folder as { folder_id: string; path: string };
  };

  before(async function () {
    await requireRuntime(this, 'apps', appsRuntime(), { need: [COMPOSE], also: missingRuntime });
    hostBefore = await hostState();
    lab = await startLab();
    d = await labDaemon(lab);
    tok = await d.token('apps-test', APP_SCOPES);
  });

  after(async () => {
    if (!lab) return;
    await d?.stop();
    await stopEngines();
    // The engine lived in its own namespaces: the host is as it was.
    expect(await hostState()).to.deep.equal(hostBefore);
  });

  describe('engine not reachable', () => {
    it('every /apps endpoint answers 503 naming the engine and the address tried', async () => {
      const d2 = await startDaemon({ configYaml: 'apps:\n  docker_host: unix:///nonexistent/hostd-test/docker.sock\n' });
      const t = await d2.token('t', APP_SCOPES);
      const calls: Array<[string, string, unknown?]> = [
        ['GET', '/apps'],
        ['POST', '/apps', { template_id: 'custom', compose_content: 'services: {}' }],
        ['GET', '/apps/templates'],
        ['GET', '/apps/discovered'],
        ['DELETE', '/apps/x'],
        ['POST', '/apps/x/actions', { action: 'start' }],
        ['GET', '/apps/x/logs'],
        ['GET', '/apps/x/stats'],
        ['PATCH', '/apps/x/compose', { compose_content: 'services: {}' }],
        ['PATCH', '/apps/x/folders', { folder_assignments: [] }],
        ['POST', '/apps/x/move', { storage_id: 'default' }],
        ['GET', '/apps/x/docs'],
        ['PUT', '/apps/x/docs', { content: 'x' }],
      ];
      expect(calls).to.have.length(13);
      for (const [m, p, body] of calls) {
        const r = await d2.request(m, `${API}${p}`, { token: t, body });
        expect(r.status, `${m} ${p}: ${r.text}`).to.equal(503);
        expect(r.body).to.deep.equal({
          error:
            'dockerd is not available: Docker engine is not reachable at unix:///nonexistent/hostd-test/docker.sock (connect ENOENT /nonexistent/hostd-test/docker.sock); start dockerd or point DOCKER_HOST / apps.docker_host at a running engine',
        });
      }
      await d2.stop();
    });

    it('DOCKER_HOST is used when the config names no engine', async () => {
      const d2 = await startDaemon({ env: { DOCKER_HOST: 'unix:///nonexistent/env/docker.sock' } });
      const t = await d2.token('t', APP_SCOPES);
      const r = await d2.request('GET', `${API}/apps`, { token: t });
      expect(r.status).to.equal(503);
      expect(r.body.error).to.contain('at unix:///nonexistent/env/docker.sock (');
      await d2.stop();
    });
  });

  describe('templates', () => {
    it('lists the bundled templates and those of the configured directory, and names the invalid files', async () => {
      const r = await req('GET', '/apps/templates');
      expect(r.status).to.equal(200);
      const ids = r.body.templates.map((t: any) => t.template_id);
      expect(ids).to.deep.equal(['static-site', 'test-web', 'uptime-kuma', 'whoami']);
      const web = r.body.templates.find((t: any) => t.template_id === 'test-web');
      expect(web).to.deep.include({
        name: 'Test web',
        source: 'directory',
        default_name: 'test-web',
        images: [lab.image],
        services: ['web'],
        ports: [{ name: 'WEB_PORT', container_port: 8080, protocol: 'tcp', default: 18080, description: 'HTTP' }],
        data_folders: [{ id: 'site', service: 'web', container_path: '/www', read_only: true, description: 'the files served' }],
      });
      expect(r.body.invalid).to.deep.equal([
        {
          file: path.join(lab.templatesDir, 'broken.yaml'),
          error: "template 'broken': services.x.privileged is refused: a privileged container has full access to the host",
        },
      ]);
    });

    it('installing an unknown or an invalid template is 404 / 400', async () => {
      expectError(await req('POST', '/apps', { template_id: 'nope' }), 404, "app template 'nope' not found");
      expectError(
        await req('POST', '/apps', { template_id: 'broken' }),
        400,
        "template 'broken' is not valid: template 'broken': services.x.privileged is refused: a privileged container has full access to the host",
      );
    });
  });

  describe('install from a template, with a folder', () => {
    let site: { folder_id: string; path: string };
    let app: any;

    it('installs, binds the folder read-only at its mount point, publishes the template port', async () => {
      site = await folder('site');
      fs.writeFileSync(path.join(site.path, 'index.html'), 'from the managed folder\n');
      const res = await install({
        template_id: 'test-web',
        storage_id: 'p2',
        folder_assignments: [{ folder_id: site.folder_id, container_path: '/www', mount_point_id: 'site' }],
      });
      app = res.app;
      expect(res.task).to.equal(null);
      expect(app).to.deep.include({
        app_id: 'test-web',
        name: 'test-web',
        template_id: 'test-web',
        storage_id: 'p2',
        state: 'running',
        desired_state: 'running',
        generation: 1,
        task_id: null,
      });
      expect(app.data_dir).to.equal(path.join(lab.pools.p2, '.hostd-apps', 'test-web'));
      expect(app.ports).to.deep.equal([{ service: 'web', host_ip: '127.0.0.1', host_port: 18080, container_port: 8080, protocol: 'tcp' }]);
      const page = await fetchInNetns(lab.engine, 'http://127.0.0.1:18080/index.html');
      expect(page).to.deep.equal({ code: 200, body: 'from the managed folder\n' });
      // Read-only, as the template's data folder says.
      const mounts = JSON.parse((await lab.engine.docker(['inspect', '--format', '{{json .Mounts}}', app.services[0].container_id])).stdout);
      expect(mounts).to.deep.include({ Type: 'bind', Source: fs.realpathSync(site.path), Destination: '/www', Mode: '', RW: false, Propagation: 'rprivate' });
    });

    it('a second install of the template gets its own id and the next free port', async () => {
      const res = await install({
        template_id: 'test-web',
        folder_assignments: [{ folder_id: site.folder_id, container_path: '/www', mount_point_id: 'site' }],
      });
      expect(res.app.app_id).to.equal('test-web-2');
      expect(res.app.storage_id).to.equal('p1');
      expect(res.app.ports[0].host_port).to.equal(18081);
      expectError(
        await req('POST', '/apps', { template_id: 'test-web', name: 'test web 2' }),
        409,
        "an app with the id 'test-web-2' already exists (the id is made from the name 'test web 2')",
      );
      const del = await req('DELETE', '/apps/test-web-2');
      expect(del.status, del.text).to.equal(200);
    });

    it('PATCH folders replaces the assignments and re-creates the containers', async () => {
      const other = await folder('other');
      fs.mkdirSync(path.join(other.path, 'pub'));
      fs.writeFileSync(path.join(other.path, 'pub', 'index.html'), 'from the sub path\n');
      const r = await req('PATCH', `/apps/${app.app_id}/folders`, {
        folder_assignments: [{ folder_id: other.folder_id, sub_path: 'pub', container_path: '/www', mount_point_id: 'site' }],
      });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.task).to.equal(null);
      expect(r.body.app).to.deep.include({ generation: 2, state: 'running' });
      expect(r.body.app.services[0].generation).to.equal(2);
      expect(r.body.app.services[0].container_id).to.not.equal(app.services[0].container_id);
      expect(await fetchInNetns(lab.engine, 'http://127.0.0.1:18080/index.html')).to.deep.equal({ code: 200, body: 'from the sub path\n' });
    });

    it('folder assignments are confined to their folder: 404 unknown folder or sub_path, 400 for .. and for a symbolic link out', async () => {
      const f = await folder('conf');
      fs.symlinkSync('/etc', path.join(f.path, 'out'));
      const patch = (a: Record<string, unknown>) => req('PATCH', `/apps/${app.app_id}/folders`, { folder_assignments: [{ container_path: '/www', ...a }] });
      expectError(await patch({ folder_id: 'f_nope' }), 404, "folder 'f_nope' not found");
      expectError(
        await patch({ folder_id: f.folder_id, sub_path: 'missing' }),
        404,
        `folder_assignments[0].sub_path 'missing' does not exist in folder '${f.folder_id}'`,
      );
      expectError(await patch({ folder_id: f.folder_id, sub_path: '../..' }), 400, "argument 'folder_assignments[0].sub_path' must stay inside the folder");
      expectError(
        await patch({ folder_id: f.folder_id, sub_path: '/etc' }),
        400,
        "argument 'folder_assignments[0].sub_path' must stay inside the folder (it is relative to the folder)",
      );
      expectError(
        await patch({ folder_id: f.folder_id, sub_path: 'out' }),
        400,
        `argument 'folder_assignments[0].sub_path' leads outside folder '${f.folder_id}' through a symbolic link`,
      );
      expectError(
        await patch({ folder_id: f.folder_id, container_path: 'www' }),
        400,
        "argument 'folder_assignments[0].container_path' must be an absolute path inside the container, without control characters, ':', ',' or '..' segments",
      );
      expectError(
        await patch({ folder_id: f.folder_id, mount_point_id: 'nope' }),
        400,
        "argument 'folder_assignments[0].mount_point_id' names no data folder of template 'test-web' and no service of the app ('nope')",
      );
      // Nothing changed.
      expect((await getApp(app.app_id)).generation).to.equal(2);
    });
  });

  describe('custom compose content', () => {
    it('refuses what would escape the app, with a 400 naming the key', async () => {
      const svc = (extra: string) => `services:\n  a:\n    image: ${lab.image}\n${extra}`;
      const cases: Array<[string, string]> = [
        ['    privileged: true\n', 'compose_content: services.a.privileged is refused: a privileged container has full access to the host'],
        ['    privileged: "yes"\n', 'compose_content: services.a.privileged is refused: a privileged container has full access to the host'],
        ['    network_mode: host\n', "compose_content: services.a.network_mode is refused: 'network_mode: host' shares the host's network namespace"],
        ['    pid: host\n', "compose_content: services.a.pid is refused: 'pid: host' shares the host's pid namespace"],
        ['    ipc: container:other\n', "compose_content: services.a.ipc is refused: 'container:other' joins a container outside the app (use service:<name>)"],
        [
          '    cap_add: [SYS_ADMIN]\n',
          "compose_content: services.a.cap_add[0] is refused: capability 'SYS_ADMIN' is beyond Docker's default set (only those may be listed)",
        ],
        ['    devices: ["/dev/sda:/dev/sda"]\n', 'compose_content: services.a.devices is refused: host devices are not given to apps'],
        [
          '    security_opt: ["seccomp=unconfined"]\n',
          "compose_content: services.a.security_opt[0] is refused: only 'no-new-privileges' may be set (seccomp, AppArmor and SELinux profiles stay Docker's defaults)",
        ],
        [
          '    volumes: ["/etc:/host-etc:ro"]\n',
          "compose_content: services.a.volumes[0] is refused: '/etc' is outside the app's data directory and its folder assignments",
        ],
        [
          '    volumes: ["../../../:/up"]\n',
          "compose_content: services.a.volumes[0] is refused: '../../../' is outside the app's data directory and its folder assignments",
        ],
        [
          '    volumes: ["/var/run/docker.sock:/var/run/docker.sock"]\n',
          "compose_content: services.a.volumes[0] is refused: '/var/run/docker.sock' is outside the app's data directory and its folder assignments",
        ],
        [
          '    volumes: [{type: bind, source: ./x, target: /x, bind: {propagation: rshared}}]\n',
          "compose_content: services.a.volumes[0].bind.propagation is refused: mount propagation 'rshared' would let mounts cross between the container and the host",
        ],
        ['    build: .\n', 'compose_content: services.a.build is refused: build is not supported: apps run images (import or pull them)'],
        ['    env_file: /etc/shadow\n', "compose_content: services.a.env_file[0] is refused: '/etc/shadow' is outside the app's data directory"],
        ['    userns_mode: host\n', "compose_content: services.a.userns_mode is refused: 'host' leaves the user namespace Docker gives the container"],
        ['    cgroup_parent: /\n', 'compose_content: services.a.cgroup_parent is refused: it places the container outside the cgroup Docker gives it'],
        [
          '    labels: {org.hostd.app: other}\n',
          "compose_content: services.a.labels: label 'org.hostd.app' is refused: labels starting with org.hostd. or com.docker.compose. belong to hostd and compose",
        ],
        ['    bogus: 1\n', "compose_content: services.a.bogus: key 'bogus' is not a compose service key hostd accepts"],
        ['    volumes: [data:/d]\nvolumes:\n  data: {external: true}\n', 'compose_content: volumes.data.external is refused: an app uses only its own volumes'],
        [
          '    volumes: [data:/d]\nvolumes:\n  data: {driver_opts: {type: none, o: bind, device: /}}\n',
          "compose_content: volumes.data.driver_opts is refused: hostd sets where the volume's data lives (the app's data directory)",
        ],
        ['networks:\n  n: {external: true}\n', 'compose_content: networks.n.external is refused: an app uses only its own networks'],
        [
          '    image: ${NOPE}\n',
          "compose_content: services.a.image: variable 'NOPE' is not set (hostd interpolates with the app's own variables only; give a default with ${NOPE:-value} or write the value)",
        ],
      ];
      for (const [extra, error] of cases) {
        const text = extra.startsWith('    image:') ? `services:\n  a:\n${extra}` : svc(extra);
        const r = await req('POST', '/apps', { template_id: 'custom', name: 'bad', compose_content: text });
        expectError(r, 400, error);
      }
      // None of them left anything behind.
      expect((await req('GET', '/apps')).body.apps.map((a: any) => a.app_id)).to.not.include('bad');
      expect(fs.existsSync(path.join(lab.pools.p1, '.hostd-apps', 'bad'))).to.equal(false);
    });

    it('rejects content that is not a compose file with a clear 400', async () => {
      const bad = async (compose_content: string, error: string) =>
        expectError(await req('POST', '/apps', { template_id: 'custom', compose_content }), 400, error);
      await bad(
        'services: [a',
        'compose_content is not valid YAML at line 1, column 13: Flow sequence in block collection must be sufficiently indented and end with a ]',
      );
      await bad('- a\n- b\n', "compose_content must be a YAML mapping with a 'services' key");
      await bad('version: "3"\n', 'compose_content has no services');
      await bad('services:\n  a: {}\n', 'compose_content: services.a has no image (hostd runs images; build is not supported)');
      await bad('servics:\n  a: {}\n', "compose_content: unknown top-level key 'servics'");
      // Compose's own validation: before a pull (the image is not on the engine) and before an up.
      await bad(
        'services:\n  a:\n    image: 127.0.0.1:1/x:1\n    mem_limit: [lots]\n',
        "compose refused the app's compose file: services.a.mem_limit must be a number or string",
      );
      await bad(
        `services:\n  a:\n    image: ${lab.image}\n    mem_limit: [lots]\n`,
        "compose refused the app's compose file: services.a.mem_limit must be a number or string",
      );
      expectError(await req('POST', '/apps', { template_id: 'custom' }), 400, "argument 'compose_content' is required when template_id is 'custom'");
      expectError(
        await req('POST', '/apps', { template_id: 'test-web', compose_content: 'services: {}' }),
        400,
        "argument 'compose_content' is only for template_id 'custom'",
      );
      expectError(
        await req('POST', '/apps', { template_id: 'custom', compose_content: webCompose(lab.image, 18090), storage_id: 'nope' }),
        404,
        "storage pool 'nope' not found",
      );
    });

    it("two apps whose id and service names join alike ('a' + 'b-web', 'a-b' + 'web') both run, each with its own containers", async () => {
      const sleeper = (service: string) => `services:\n  ${service}:\n    image: ${lab.image}\n    init: true\n    command: ["sleep", "3600"]\n`;
      const made: string[] = [];
      try {
        const one = await install({ template_id: 'custom', name: 'a', compose_content: sleeper('b-web') });
        made.push(one.app.app_id);
        const two = await install({ template_id: 'custom', name: 'a-b', compose_content: sleeper('web') });
        made.push(two.app.app_id);
        for (const [r, service] of [
          [one, 'b-web'],
          [two, 'web'],
        ] as const) {
          expect(r.app.state, r.app.app_id).to.equal('running');
          expect(r.app.services.map((x: any) => x.service)).to.deep.equal([service]);
        }
        expect(one.app.services[0].name).to.not.equal(two.app.services[0].name);
      } finally {
        for (const id of made) expect((await req('DELETE', `/apps/${id}`)).status).to.equal(200);
      }
    });
  });

  describe('lifecycle of a custom app', () => {
    const id = 'life';
    let first: any;

    it('installs with its own data directory: relative binds and named volumes live there', async () => {
      const compose = `services:
  web:
    image: ${lab.image}
    init: true
    command: ["sh", "-c", "echo started-$$HOSTNAME; echo to-stderr >&2; echo kept > /store/kept; echo bound > /bound/b; exec httpd -f -p 8080 -h /www"]
    ports: ["127.0.0.1:18100:8080"]
    volumes: ["store:/store", "./bound:/bound"]
volumes:
  store: {}
`;
      const res = await install({ template_id: 'custom', name: 'Life', compose_content: compose });
      first = res.app;
      expect(first).to.deep.include({ app_id: id, name: 'Life', template_id: 'custom', storage_id: 'p1', state: 'running' });
      const dataDir = path.join(lab.pools.p1, '.hostd-apps', id);
      expect(first.data_dir).to.equal(dataDir);
      expect(fs.readFileSync(path.join(dataDir, 'volumes/store/kept'), 'utf8')).to.equal('kept\n');
      expect(fs.readFileSync(path.join(dataDir, 'bound/b'), 'utf8')).to.equal('bound\n');
      expect((await fetchInNetns(lab.engine, 'http://127.0.0.1:18100/')).code).to.equal(200);
    });

    it('logs: trailing lines of every container, stdout and stderr, default tail 100, tail 0 empty, over 10000 is 400', async () => {
      const all = await req('GET', `/apps/${id}/logs`);
      expect(all.status).to.equal(200);
      expect(all.body.tail).to.equal(100);
      const texts = all.body.lines.map((l: any) => [l.service, l.stream, l.text]);
      expect(texts).to.deep.include(['web', 'stderr', 'to-stderr']);
      expect(texts.some((t: string[]) => t[1] === 'stdout' && /^started-[0-9a-f]{12}$/.test(t[2]))).to.equal(true);
      expect(all.body.lines[0].container).to.equal('hostd_life_app-web-1');
      expect(all.body.lines[0].time).to.match(/^\d{4}-\d\d-\d\dT/);
      const one = await req('GET', `/apps/${id}/logs?tail=1`);
      expect(one.body.lines).to.have.length(1);
      expect((await req('GET', `/apps/${id}/logs?tail=0`)).body.lines).to.deep.equal([]);
      expectError(await req('GET', `/apps/${id}/logs?tail=10001`), 400, "argument 'tail' must be <= 10000");
      expectError(await req('GET', '/apps/nope/logs'), 404, "app 'nope' not found");
    });

    it('hostctl apps list and logs show the app', async () => {
      const list = await hostctl(d.dataDir, ['apps', 'list']);
      expect(list.code, list.stderr).to.equal(0);
      expect(list.stdout).to.match(/^life +Life +running +p1 +127\.0\.0\.1:18100->8080\/tcp$/m);
      const logs = await hostctl(d.dataDir, ['apps', 'logs', 'life', '--tail', '5']);
      expect(logs.code, logs.stderr).to.equal(0);
      expect(logs.stderr).to.contain('web | to-stderr\n');
    });

    it('stats: real CPU, memory, network and block I/O per container', async () => {
      for (let i = 0; i < 3; i++) await fetchInNetns(lab.engine, 'http://127.0.0.1:18100/');
      const r = await req('GET', `/apps/${id}/stats`);
      expect(r.status).to.equal(200);
      expect(r.body.containers).to.have.length(1);
      const c = r.body.containers[0];
      expect(c).to.deep.include({ service: 'web', name: 'hostd_life_app-web-1', state: 'running' });
      expect(c.stats.cpu_total_ns).to.be.greaterThan(0);
      expect(c.stats.memory.usage_bytes).to.be.greaterThan(0);
      expect(c.stats.memory.limit_bytes).to.be.greaterThan(c.stats.memory.usage_bytes);
      expect(c.stats.network.rx_bytes).to.be.greaterThan(0);
      expect(c.stats.network.tx_bytes).to.be.greaterThan(0);
      expect(c.stats.block_io).to.have.all.keys('read_bytes', 'write_bytes');
      expect(c.stats.pids).to.be.at.least(2);
      expect(r.body.totals.memory_usage_bytes).to.equal(c.stats.memory.usage_bytes);
    });

    it('actions are idempotent: stop, stop, start, start, restart', async () => {
      const act = async (action: string, state: string) => {
        const r = await req('POST', `/apps/${id}/actions`, { action });
        expect(r.status, r.text).to.equal(200);
        expect(r.body.action).to.equal(action);
        expect(r.body.app.state).to.equal(state);
        return r.body.app;
      };
      const s1 = await act('stop', 'stopped');
      expect(s1.desired_state).to.equal('stopped');
      expect(s1.services[0].state).to.equal('exited');
      await act('stop', 'stopped');
      const s3 = await act('start', 'running');
      expect(s3.services[0].container_id).to.equal(first.services[0].container_id);
      await act('start', 'running');
      const startedAt = async () => (await lab.engine.docker(['inspect', '--format', '{{.State.StartedAt}}', first.services[0].container_id])).stdout.trim();
      const t0 = await startedAt();
      await act('restart', 'running');
      expect(await startedAt()).to.not.equal(t0);
      expectError(await req('POST', '/apps/nope/actions', { action: 'start' }), 404, "app 'nope' not found");
    });

    it('PATCH compose replaces the content and applies it; bad content is 400 and changes nothing', async () => {
      const before = await getApp(id);
      expectError(
        await req('PATCH', `/apps/${id}/compose`, { compose_content: 'services:\n  web:\n    image: x\n    privileged: true\n' }),
        400,
        'compose_content: services.web.privileged is refused: a privileged container has full access to the host',
      );
      expect((await getApp(id)).generation).to.equal(before.generation);
      const r = await req('PATCH', `/apps/${id}/compose`, {
        compose_content: webCompose(lab.image, 18101, '    volumes: ["store:/store"]\nvolumes:\n  store: {}\n'),
      });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.task).to.equal(null);
      expect(r.body.app).to.deep.include({ generation: before.generation + 1, state: 'running' });
      expect(r.body.app.ports.map((p: any) => p.host_port)).to.deep.equal([18101]);
      expect((await fetchInNetns(lab.engine, 'http://127.0.0.1:18101/')).code).to.equal(200);
      // The named volume kept its data across the change.
      expect(fs.readFileSync(path.join(before.data_dir, 'volumes/store/kept'), 'utf8')).to.equal('kept\n');
    });

    it('docs: empty, replaced, appended as timestamped entries', async () => {
      const g0 = await req('GET', `/apps/${id}/docs`);
      expect(g0.body).to.deep.equal({ app_id: id, content: '', updated_at: null });
      const p1 = await req('PUT', `/apps/${id}/docs`, { content: '# Life\n\nAn app.' });
      expect(p1.status).to.equal(200);
      expect(p1.body.content).to.equal('# Life\n\nAn app.');
      const p2 = await req('PUT', `/apps/${id}/docs`, { content: 'restarted it', append_entry: true });
      expect(p2.body.content).to.match(/^# Life\n\nAn app\.\n\n## \d{4}-\d\d-\d\dT[\d:.]+Z\n\nrestarted it\n$/);
      const g1 = await req('GET', `/apps/${id}/docs`);
      expect(g1.body).to.deep.equal({ app_id: id, content: p2.body.content, updated_at: p2.body.updated_at });
      expectError(await req('GET', '/apps/nope/docs'), 404, "app 'nope' not found");
    });

    it('moves its data to another pool as a task: stopped, copied, verified, restarted', async () => {
      const before = await getApp(id);
      fs.writeFileSync(path.join(before.data_dir, 'bound', 'big'), Buffer.alloc(3 * 1024 * 1024, 7));
      fs.symlinkSync('big', path.join(before.data_dir, 'bound', 'link'));
      expectError(await req('POST', `/apps/${id}/move`, { storage_id: 'p1' }), 409, "app 'life' is already in storage pool 'p1'");
      expectError(await req('POST', `/apps/${id}/move`, { storage_id: 'nope' }), 404, "storage pool 'nope' not found");
      const r = await req('POST', `/apps/${id}/move`, { storage_id: 'p2' });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.task).to.include({ kind: 'apps.app.move', resource: `apps/${id}` });
      // The app is busy while it moves (stopping it alone takes longer than this request).
      expectError(await req('POST', `/apps/${id}/actions`, { action: 'restart' }), 409, "app 'life' is busy: move in progress");
      expect((await getApp(id)).state).to.equal('moving');
      const task = await waitTask(d, tok, r.body.task.task_id);
      expect(task.state, task.error).to.equal('succeeded');
      expect(task.progress).to.equal(100);
      const target = path.join(lab.pools.p2, '.hostd-apps', id);
      expect(task.result).to.deep.include({ app_id: id, storage_id: 'p2', data_dir: target });
      const after = await getApp(id);
      expect(after).to.deep.include({ storage_id: 'p2', data_dir: target, state: 'running', task_id: null, generation: before.generation + 1 });
      expect(fs.existsSync(before.data_dir)).to.equal(false);
      expect(fs.readFileSync(path.join(target, 'volumes/store/kept'), 'utf8')).to.equal('kept\n');
      expect(fs.statSync(path.join(target, 'bound/big')).size).to.equal(3 * 1024 * 1024);
      expect(fs.readlinkSync(path.join(target, 'bound/link'))).to.equal('big');
      // The volume is bound to its new place.
      const mounts = JSON.parse((await lab.engine.docker(['inspect', '--format', '{{json .Mounts}}', after.services[0].container_id])).stdout);
      const vol = mounts.find((m: any) => m.Destination === '/store');
      expect(vol.Type).to.equal('volume');
      const dev = JSON.parse((await lab.engine.docker(['volume', 'inspect', vol.Name])).stdout)[0].Options.device;
      expect(dev).to.equal(path.join(target, 'volumes/store'));
      const logs = await d.request('GET', `${API}/tasks/${task.task_id}/logs`, { token: tok });
      expect(logs.body.lines.map((l: any) => l.text)).to.include.members(['stopping the app', 'verifying the copy', 'moved']);
    });

    it('lists containers no app owns as discovered', async () => {
      const run = await lab.engine.docker(['run', '-d', '--name', 'stray', '--init', lab.image, 'sleep', '600']);
      expect(run.code, run.stderr).to.equal(0);
      const r = await req('GET', '/apps/discovered');
      expect(r.status).to.equal(200);
      expect(r.body.containers.map((c: any) => c.name)).to.deep.equal(['stray']);
      expect(r.body.containers[0]).to.deep.include({ image: lab.image, state: 'running', project: null, service: null });
      await lab.engine.docker(['rm', '-f', 'stray']);
    });

    it('uninstall removes containers, networks, volumes and the data directory; managed folders stay', async () => {
      const f = await folder('keepme');
      fs.writeFileSync(path.join(f.path, 'precious'), 'yes');
      const p = await req('PATCH', `/apps/${id}/folders`, { folder_assignments: [{ folder_id: f.folder_id, container_path: '/data' }] });
      expect(p.status, p.text).to.equal(200);
      const app = await getApp(id);
      const r = await req('DELETE', `/apps/${id}`);
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.deep.equal({ app_id: id, deleted: true, data_dir: app.data_dir, folders_kept: [f.folder_id] });
      expect(await getApp(id)).to.equal(undefined);
      const label = 'label=com.docker.compose.project=hostd_life_app';
      expect((await lab.engine.docker(['ps', '-aq', '--filter', label])).stdout.trim()).to.equal('');
      expect((await lab.engine.docker(['network', 'ls', '-q', '--filter', label])).stdout.trim()).to.equal('');
      expect((await lab.engine.docker(['volume', 'ls', '-q', '--filter', label])).stdout.trim()).to.equal('');
      expect(fs.existsSync(app.data_dir)).to.equal(false);
      expect(fs.readFileSync(path.join(f.path, 'precious'), 'utf8')).to.equal('yes');
      expectError(await req('DELETE', `/apps/${id}`), 404, "app 'life' not found");
    });
  });

  describe('images the engine lacks', () => {
    let registry: TestRegistry;

    before(async () => {
      registry = await startRegistry(lab.engine.netns, await testRootfsTar(), 15000, 1500);
    });
    after(async () => registry?.stop());

    it('are pulled as a task with progress, then the app starts', async () => {
      const image = `${registry.address}/hostd/pulled:1`;
      const res = await install({
        template_id: 'custom',
        name: 'pulled',
        compose_content: `services:\n  s:\n    image: ${image}\n    init: true\n    command: ["sleep", "600"]\n`,
      });
      expect(res.app).to.deep.include({ app_id: 'pulled', state: 'installing' });
      expect(res.task).to.include({ kind: 'apps.app.install', state: 'queued', resource: 'apps/pulled' });
      // Busy while the task runs.
      expectError(await req('DELETE', '/apps/pulled'), 409, "app 'pulled' is busy: install in progress");
      const task = await waitTask(d, tok, res.task.task_id);
      expect(task.state, task.error).to.equal('succeeded');
      const lines = (await d.request('GET', `${API}/tasks/${task.task_id}/logs`, { token: tok })).body.lines.map((l: any) => l.text);
      expect(lines).to.include.members([`pulling ${image}`, `pulled ${image}`, 'installed']);
      expect((await getApp('pulled')).state).to.equal('running');
      expect((await req('DELETE', '/apps/pulled')).status).to.equal(200);
    });

    it('a compose update to an image the engine lacks pulls it in a task, then applies', async () => {
      const app = await install({ template_id: 'custom', name: 'repull', compose_content: webCompose(lab.image, 18110) });
      const image = `${registry.address}/hostd/next:2`;
      const r = await req('PATCH', '/apps/repull/compose', {
        compose_content: `services:\n  s:\n    image: ${image}\n    init: true\n    command: ["sleep", "600"]\n`,
      });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.task).to.include({ kind: 'apps.app.update', resource: 'apps/repull' });
      expect(r.body.app.generation).to.equal(app.app.generation);
      const task = await waitTask(d, tok, r.body.task.task_id);
      expect(task.state, task.error).to.equal('succeeded');
      const after = await getApp('repull');
      expect(after).to.deep.include({ generation: 2, state: 'running' });
      expect(after.services.map((x: any) => [x.service, x.image])).to.deep.equal([['s', image]]);
      expect((await req('DELETE', '/apps/repull')).status).to.equal(200);
    });

    it('no reachable registry: the task fails with a clear error and the install is rolled back', async () => {
      const image = '127.0.0.1:1/nothing/here:1';
      const res = await install({ template_id: 'custom', name: 'unpullable', compose_content: `services:\n  s:\n    image: ${image}\n` });
      const task = await waitTask(d, tok, res.task.task_id);
      expect(task.state).to.equal('failed');
      expect(task.error).to.match(
        /^install of app 'unpullable' rolled back: cannot pull image '127\.0\.0\.1:1\/nothing\/here:1': no registry is reachable \(.*connection refused.*\); load the image into the engine \(docker load \/ docker import\) and install again$/,
      );
      expect(await getApp('unpullable')).to.equal(undefined);
      expect(fs.existsSync(path.join(lab.pools.p1, '.hostd-apps', 'unpullable'))).to.equal(false);
    });
  });

  describe('activity', () => {
    it('each mutating call wrote one row naming the app', async () => {
      const r = await d.request('GET', `${API}/activity?limit=200`, { token: await d.token('act', ['system.read']) });
      expect(r.status, r.text).to.equal(200);
      const installs = r.body.events.filter((e: any) => e.target === 'apps/life' && e.category === 'app');
      expect(
        installs.map((e: any) => e.summary),
        JSON.stringify(r.body.events.slice(0, 5)),
      ).to.include.members(['Installed app Life (custom)', 'Uninstalled app Life', 'Stop app Life', 'Restart app Life']);
    });
  });
});
