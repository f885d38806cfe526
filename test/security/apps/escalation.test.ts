/**
 * The escalation suite, apps domain: one token per scope (apps.read,
 * apps.manage), each known way out of an app tried against a real Docker
 * engine (a private dockerd, as the apps runtime tests start it), with the
 * exact status, and afterwards proof that nothing outside was touched: the
 * sentinels (outside every root, in another app's data directory, in the
 * pools' .vms and .hostd-lxc) unread and unchanged, kernel.core_pattern and
 * the host's mounts as they were, no process of an attempt running as host
 * root, a host socket named by a log driver never connected to.
 */
import { expect } from 'chai';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { appsRuntime, missingRuntime, stopEngines } from '../../helpers/apps-engine.js';
import { APP_SCOPES, labDaemon, startLab, webCompose, type AppsLab } from '../../helpers/apps-lab.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { COMPOSE } from '../../../daemon/apps/driver.js';
import { eventually, type TestDaemon } from '../../helpers/daemon.js';
import { HostGuard, rootProcessesWith } from '../../helpers/host-guard.js';
import { Store } from '../../../daemon/store/store.js';

const API = '/api/v1';

/**
 * Mount points other test runs on this shared machine make meanwhile (their
 * own temporary directories and network namespaces): every other new host
 * mount, anywhere else or under this suite's own directories, fails the check.
 */
function othersMounts(mine: string[]): string[] {
  const tmp = os.tmpdir();
  const dirs = fs
    .readdirSync(tmp)
    .map((n) => path.join(tmp, n))
    .filter((p) => !mine.some((m) => m === p || m.startsWith(`${p}/`) || p.startsWith(`${m}/`)));
  return [...dirs, '/run/netns'];
}

describe('escalation: apps (apps.read, apps.manage) on a real Docker engine', function () {
  this.timeout(600_000);
  const MARKER = `hostd-esc-${crypto.randomBytes(4).toString('hex')}`;
  const SECRET = `victim-pw-${crypto.randomBytes(8).toString('hex')}`;
  let lab: AppsLab;
  let d: TestDaemon;
  let admin: string;
  let reader: string;
  let manager: string;
  let guard: HostGuard;
  let outside: string;
  let victimData: string;
  let logSocket: net.Server;
  let logConnections = 0;

  const call = (token: string, method: string, p: string, body?: unknown) => d.request(method, `${API}${p}`, { token, body });
  const expectError = (r: { status: number; body: any; text: string }, status: number, error: string | RegExp) => {
    expect(r.status, r.text).to.equal(status);
    if (typeof error === 'string') expect(r.body).to.deep.equal({ error });
    else expect(r.body.error).to.match(error);
  };
  const appIds = async () => (await call(admin, 'GET', '/apps')).body.apps.map((a: any) => a.app_id).sort();
  /** A service of the attack, carrying the marker (a process of it running would show). */
  const attack = (extra: string, top = '') =>
    `services:\n  a:\n    image: ${lab.image}\n    command: ["sh", "-c", "echo ${MARKER}; sleep 3600"]\n${extra}${top}`;

  before(async function () {
    await requireRuntime(this, 'apps', appsRuntime(), { need: [COMPOSE], also: missingRuntime });
    lab = await startLab();
    d = await labDaemon(lab);
    admin = await d.token('esc-admin', [...APP_SCOPES, 'system.read']);
    reader = await d.token('esc-apps-read', ['apps.read']);
    manager = await d.token('esc-apps-manage', ['apps.manage']);
    outside = path.join(lab.dir, 'outside');
    fs.mkdirSync(outside);
    // The victim: another app, with a password in its environment and a secret file.
    const victim = `services:
  db:
    image: ${lab.image}
    init: true
    command: ["sh", "-c", "echo victim up; exec sleep 3600"]
    environment: {POSTGRES_PASSWORD: "${SECRET}"}
    secrets: [pw]
    volumes: ["data:/data"]
volumes:
  data: {}
secrets:
  pw: {file: ./pw.txt}
`;
    victimData = path.join(lab.pools.p1, '.hostd-apps', 'victim');
    // Installed first without the secret file (its data directory does not exist before), then given it.
    const bare = victim.replace('    secrets: [pw]\n', '').replace('secrets:\n  pw: {file: ./pw.txt}\n', '');
    const r0 = await call(admin, 'POST', '/apps', { template_id: 'custom', name: 'victim', compose_content: bare });
    expect(r0.status, r0.text).to.equal(201);
    fs.writeFileSync(path.join(victimData, 'pw.txt'), `${SECRET}\n`);
    const r1 = await call(admin, 'PATCH', '/apps/victim/compose', { compose_content: victim });
    expect(r1.status, r1.text).to.equal(200);
    // A unix socket of the host, as a log driver would be pointed at (the Docker socket in the issue).
    logSocket = net.createServer((s) => {
      logConnections++;
      s.destroy();
    });
    await new Promise<void>((resolve) => logSocket.listen(path.join(outside, 'log.sock'), resolve));
    guard = new HostGuard();
    guard.plant(outside, victimData, path.join(lab.pools.p1, '.vms'), path.join(lab.pools.p1, '.hostd-lxc'), path.join(lab.pools.p2, '.vms'));
    guard.snapshot();
  });

  after(async () => {
    if (!lab) return;
    logSocket?.close();
    guard?.remove();
    await d?.stop();
    await stopEngines();
  });

  afterEach(function () {
    if (!guard) return;
    // After every attempt: nothing outside was touched.
    guard.assertIntact();
    guard.assertHostUnchanged(othersMounts([lab.dir, lab.engine.dir, d.dataDir]));
    guard.assertNoRootProcess(MARKER);
  });

  describe('apps.manage: compose content that would leave the app', () => {
    const cases: Array<[string, string, string, string | RegExp]> = [
      // [what, service keys, top-level keys, error]
      [
        'host bind mount',
        '    volumes: ["/etc:/host-etc:ro"]\n',
        '',
        "compose_content: services.a.volumes[0] is refused: '/etc' is outside the app's data directory and its folder assignments",
      ],
      [
        'the Docker socket',
        '    volumes: ["/var/run/docker.sock:/var/run/docker.sock"]\n',
        '',
        "compose_content: services.a.volumes[0] is refused: '/var/run/docker.sock' is outside the app's data directory and its folder assignments",
      ],
      [
        "another app's data by its path",
        '    volumes: ["VICTIM:/v"]\n',
        '',
        /^compose_content: services\.a\.volumes\[0\] is refused: '\/.*\/\.hostd-apps\/victim' is outside the app's data directory and its folder assignments$/,
      ],
      [
        "another app's data by ..",
        '    volumes: ["../victim:/v"]\n',
        '',
        "compose_content: services.a.volumes[0] is refused: '../victim' is outside the app's data directory and its folder assignments",
      ],
      [
        'a volume that is a bind in disguise',
        '    volumes: ["v:/v"]\n',
        'volumes:\n  v: {driver_opts: {type: none, o: bind, device: /}}\n',
        "compose_content: volumes.v.driver_opts is refused: hostd sets where the volume's data lives (the app's data directory)",
      ],
      ['privileged', '    privileged: true\n', '', 'compose_content: services.a.privileged is refused: a privileged container has full access to the host'],
      [
        'cap_add',
        '    cap_add: [SYS_ADMIN]\n',
        '',
        "compose_content: services.a.cap_add[0] is refused: capability 'SYS_ADMIN' is beyond Docker's default set (only those may be listed)",
      ],
      ['devices', '    devices: ["/dev/sda:/dev/sda"]\n', '', 'compose_content: services.a.devices is refused: host devices are not given to apps'],
      [
        'device_cgroup_rules',
        '    device_cgroup_rules: ["b *:* rwm"]\n',
        '',
        'compose_content: services.a.device_cgroup_rules is refused: host devices are not given to apps',
      ],
      [
        'security_opt',
        '    security_opt: ["seccomp=unconfined"]\n',
        '',
        "compose_content: services.a.security_opt[0] is refused: only 'no-new-privileges' may be set (seccomp, AppArmor and SELinux profiles stay Docker's defaults)",
      ],
      [
        'network_mode host',
        '    network_mode: host\n',
        '',
        "compose_content: services.a.network_mode is refused: 'network_mode: host' shares the host's network namespace",
      ],
      ['pid host', '    pid: host\n', '', "compose_content: services.a.pid is refused: 'pid: host' shares the host's pid namespace"],
      ['ipc host', '    ipc: host\n', '', "compose_content: services.a.ipc is refused: 'ipc: host' shares the host's ipc namespace"],
      ['uts host', '    uts: host\n', '', "compose_content: services.a.uts is refused: 'uts: host' shares the host's uts namespace"],
      ['cgroup host', '    cgroup: host\n', '', "compose_content: services.a.cgroup is refused: 'cgroup: host' shares the host's cgroup namespace"],
      [
        'userns_mode host',
        '    userns_mode: host\n',
        '',
        "compose_content: services.a.userns_mode is refused: 'host' leaves the user namespace Docker gives the container",
      ],
      [
        "another app's network by its engine name",
        '    network_mode: hostd_victim_app_default\n',
        '',
        "compose_content: services.a.network_mode is refused: 'hostd_victim_app_default' joins an engine network outside the app (accepted: none, service:<name>; declare the app's own networks under networks)",
      ],
      [
        "another app's container's network",
        '    network_mode: container:hostd_victim_app-db-1\n',
        '',
        "compose_content: services.a.network_mode is refused: 'container:hostd_victim_app-db-1' joins a container outside the app (use service:<name>)",
      ],
      [
        "another app's container's processes",
        '    pid: container:hostd_victim_app-db-1\n',
        '',
        "compose_content: services.a.pid is refused: 'container:hostd_victim_app-db-1' joins a container outside the app (use service:<name>)",
      ],
      [
        "another app's container's volumes",
        '    volumes_from: ["container:hostd_victim_app-db-1"]\n',
        '',
        "compose_content: services.a.volumes_from[0] is refused: 'container:hostd_victim_app-db-1' mounts the volumes of a container outside the app",
      ],
      [
        'external_links',
        '    external_links: [hostd_victim_app-db-1]\n',
        '',
        'compose_content: services.a.external_links is refused: it links containers outside the app',
      ],
      [
        'an external network',
        '    networks: [host]\n',
        'networks:\n  host: {external: true}\n',
        'compose_content: networks.host.external is refused: an app uses only its own networks',
      ],
      [
        'a subnet over a host route',
        '',
        'networks:\n  default:\n    ipam: {config: [{subnet: 127.0.0.0/8}]}\n',
        "compose_content: networks.default.ipam.config is refused: an app network's subnet becomes a route on the host, which could take the route of a host network; the engine picks one from its address pools",
      ],
      [
        'env_file outside',
        '    env_file: /etc/shadow\n',
        '',
        "compose_content: services.a.env_file[0] is refused: '/etc/shadow' is outside the app's data directory",
      ],
      [
        'extends.file',
        '    extends: {file: /etc/compose.yaml, service: x}\n',
        '',
        "compose_content: services.a.extends.file is refused: hostd reads no other file than the app's compose content",
      ],
      ['include', '', 'include: [/etc/compose.yaml]\n', "compose_content: include is refused: hostd reads no other file than the app's compose content"],
      [
        'a secret file outside',
        '    secrets: [s]\n',
        'secrets:\n  s: {file: /etc/shadow}\n',
        "compose_content: secrets.s.file is refused: '/etc/shadow' is outside the app's data directory",
      ],
      [
        'a secret from the environment',
        '    secrets: [s]\n',
        'secrets:\n  s: {environment: HOME}\n',
        "compose_content: secrets.s.environment is refused: it would read hostd's own environment",
      ],
      ['build', '    build: /\n', '', 'compose_content: services.a.build is refused: build is not supported: apps run images (import or pull them)'],
      [
        'cgroup_parent',
        '    cgroup_parent: /\n',
        '',
        'compose_content: services.a.cgroup_parent is refused: it places the container outside the cgroup Docker gives it',
      ],
      ['runtime', '    runtime: runc-unconfined\n', '', 'compose_content: services.a.runtime is refused: the container runtime stays the engine default'],
      [
        'annotations',
        '    annotations: {org.systemd.property.DeviceAllow: "/dev/sda rwm"}\n',
        '',
        "compose_content: services.a.annotations is refused: the container runtime reads annotations (runc's org.systemd.property.*, crun's run.oci.*) and they can change the container's confinement",
      ],
      [
        "another app's label",
        '    labels: {org.hostd.app: victim}\n',
        '',
        "compose_content: services.a.labels: label 'org.hostd.app' is refused: labels starting with org.hostd. or com.docker.compose. belong to hostd and compose",
      ],
      [
        "another app's container name",
        '    container_name: hostd_victim_app-db-1\n',
        '',
        "compose_content: services.a.container_name is refused: container names are shared by every container of the engine (one could take the name of another app's container); compose names each container after the app",
      ],
      [
        'logging to a host unix socket',
        '    logging: {driver: syslog, options: {syslog-address: "unix://SOCKET"}}\n',
        '',
        "compose_content: services.a.logging.driver is refused: 'syslog' sends the log outside the engine's own disk (accepted: json-file, local, none)",
      ],
      [
        'logging through gelf',
        '    logging: {driver: gelf, options: {gelf-address: "udp://127.0.0.1:12201"}}\n',
        '',
        "compose_content: services.a.logging.driver is refused: 'gelf' sends the log outside the engine's own disk (accepted: json-file, local, none)",
      ],
      [
        'the host core_pattern by sysctl',
        '    sysctls: {kernel.core_pattern: "|/bin/sh -c MARKER"}\n',
        '',
        /^compose_content: services\.a\.sysctls: sysctl 'kernel\.core_pattern' is refused: it is not namespaced \(it would set the host's kernel\)/,
      ],
      [
        'a host vm sysctl',
        '    sysctls: ["vm.overcommit_memory=1"]\n',
        '',
        /^compose_content: services\.a\.sysctls: sysctl 'vm\.overcommit_memory' is refused: it is not namespaced/,
      ],
      [
        'realtime priority',
        '    ulimits: {rtprio: 99}\n',
        '',
        "compose_content: services.a.ulimits.rtprio is refused: it lets the container's processes take scheduling priority over the host's",
      ],
      [
        'an unkillable container',
        '    oom_score_adj: -1000\n',
        '',
        "compose_content: services.a.oom_score_adj is refused: a negative score (-1000) makes the kernel kill the host's processes before the app's",
      ],
      [
        'publishing on every host address',
        '    ports: ["0.0.0.0:18555:80"]\n',
        '',
        "compose_content: services.a.ports[0] is refused: it publishes on every host address; apps publish on loopback or on apps.publish_address (127.0.0.1), e.g. '127.0.0.1:8080:80'",
      ],
    ];
    for (const [what, extra, top, error] of cases) {
      it(`refuses ${what} with 400, installing nothing`, async () => {
        const text = attack(extra.replace('VICTIM', victimData).replace('SOCKET', path.join(outside, 'log.sock')).replace('MARKER', MARKER), top);
        const r = await call(manager, 'POST', '/apps', { template_id: 'custom', name: `atk-${crypto.randomBytes(3).toString('hex')}`, compose_content: text });
        expectError(r, 400, error);
        expect(r.text).to.not.include(SECRET);
        expect(await appIds()).to.deep.equal(['victim']);
        expect(fs.readdirSync(path.join(lab.pools.p1, '.hostd-apps')).sort()).to.deep.equal(['victim']);
        expect(logConnections, 'dockerd connected to the host socket').to.equal(0);
      });
    }

    it('a sysctl the kernel keeps global (net.core.bpf_jit_enable) is 400 from the runtime, and the install is rolled back', async () => {
      const r = await call(manager, 'POST', '/apps', {
        template_id: 'custom',
        name: 'atk-net',
        compose_content: `services:\n  a:\n    image: ${lab.image}\n    init: true\n    command: ["sleep", "3600"]\n    sysctls: {net.core.bpf_jit_enable: "1"}\n`,
      });
      expectError(
        r,
        400,
        "sysctl 'net.core.bpf_jit_enable' cannot be set in the container (no such file or directory): the engine's kernel does not namespace it, so it is the host's own setting",
      );
      expect(await appIds()).to.deep.equal(['victim']);
      expect((await lab.engine.docker(['ps', '-aq', '--filter', 'label=org.hostd.app=atk-net'])).stdout.trim()).to.equal('');
    });
  });

  describe('apps.manage: an app of its own, and the paths around it', () => {
    let atkData: string;
    let folderId: string;
    let folderPath: string;

    before(async () => {
      const r = await call(manager, 'POST', '/apps', { template_id: 'custom', name: 'atk', compose_content: webCompose(lab.image, 18600) });
      expect(r.status, r.text).to.equal(201);
      atkData = path.join(lab.pools.p1, '.hostd-apps', 'atk');
      // A folder made by the operator, with a link planted in it towards the victim's data.
      const f = await call(admin, 'POST', '/folders', { storage_id: 'p1', name: 'shared' });
      expect(f.status, f.text).to.equal(201);
      folderId = f.body.folder.folder_id;
      folderPath = f.body.folder.path;
      fs.symlinkSync(victimData, path.join(folderPath, 'to-victim'));
      // What a container could do in its own data directory: a link out, to another app's data.
      fs.symlinkSync(victimData, path.join(atkData, 'to-victim'));
    });

    it('a bind through a link in its own data directory is 400', async () => {
      const r = await call(manager, 'PATCH', '/apps/atk/compose', { compose_content: webCompose(lab.image, 18600, '    volumes: ["./to-victim:/v:ro"]\n') });
      expectError(r, 400, "compose_content: services.web.volumes[0] is refused: './to-victim' leads outside the app's data directory through a symbolic link");
    });

    it('an env file through a link in its own data directory is 400', async () => {
      const r = await call(manager, 'PATCH', '/apps/atk/compose', { compose_content: webCompose(lab.image, 18600, '    env_file: ./to-victim/pw.txt\n') });
      expectError(
        r,
        400,
        "compose_content: services.web.env_file[0] is refused: './to-victim/pw.txt' leads outside the app's data directory through a symbolic link",
      );
    });

    it('a secret file through a link in its own data directory is 400', async () => {
      const r = await call(manager, 'PATCH', '/apps/atk/compose', {
        compose_content: webCompose(lab.image, 18600, '    secrets: [s]\nsecrets:\n  s: {file: ./to-victim/pw.txt}\n'),
      });
      expectError(r, 400, "compose_content: secrets.s.file is refused: './to-victim/pw.txt' leads outside the app's data directory through a symbolic link");
    });

    it('folder assignments: traversal, an absolute sub_path and a link into another app are 400', async () => {
      const patch = (a: Record<string, unknown>) =>
        call(manager, 'PATCH', '/apps/atk/folders', { folder_assignments: [{ folder_id: folderId, container_path: '/f', ...a }] });
      expectError(await patch({ sub_path: '../..' }), 400, "argument 'folder_assignments[0].sub_path' must stay inside the folder");
      expectError(await patch({ sub_path: `../../.hostd-apps/victim` }), 400, "argument 'folder_assignments[0].sub_path' must stay inside the folder");
      expectError(
        await patch({ sub_path: victimData }),
        400,
        "argument 'folder_assignments[0].sub_path' must stay inside the folder (it is relative to the folder)",
      );
      expectError(
        await patch({ sub_path: 'to-victim' }),
        400,
        `argument 'folder_assignments[0].sub_path' leads outside folder '${folderId}' through a symbolic link`,
      );
    });

    it("hostd's environment never reaches the app: env files and names without a value get nothing of it", async () => {
      fs.writeFileSync(path.join(atkData, 'leak.env'), 'LEAK=${DOCKER_HOST}|${HOME}|${DOCKER_CONFIG}\nDOCKER_HOST\nHOME=/app\n');
      const r = await call(manager, 'PATCH', '/apps/atk/compose', {
        compose_content: webCompose(lab.image, 18600, '    env_file: ./leak.env\n    environment: [DOCKER_CONFIG, KEEP=1]\n'),
      });
      expect(r.status, r.text).to.equal(200);
      const ids = (await lab.engine.docker(['ps', '-q', '--filter', 'label=org.hostd.app=atk'])).stdout.trim().split('\n').filter(Boolean);
      expect(ids).to.have.length(1);
      const env: string[] = JSON.parse((await lab.engine.docker(['inspect', '-f', '{{json .Config.Env}}', ids[0]])).stdout);
      expect(env).to.include.members(['LEAK=||', 'HOME=/app', 'KEEP=1']);
      expect(env.some((e) => e.startsWith('DOCKER_HOST=') || e.startsWith('DOCKER_CONFIG='))).to.equal(false);
      expect(env.join('\n')).to.not.include(lab.engine.sock);
      expect(env.join('\n')).to.not.include(d.dataDir);
    });

    it('apps.manage cannot read: every GET of the domain is 403', async () => {
      for (const p of ['/apps', '/apps/templates', '/apps/discovered', '/apps/victim/logs', '/apps/victim/stats', '/apps/victim/docs']) {
        const r = await call(manager, 'GET', p);
        expect(r.status, p).to.equal(403);
        expect(r.body.error).to.match(/^token 'esc-apps-manage' lacks scope 'apps\.read' needed by apps_/);
      }
    });
  });

  describe("apps.read: what every app shows, never another app's secrets", () => {
    it('reads lists, logs, stats, templates and docs without the compose content or its secrets', async () => {
      for (const p of ['/apps', '/apps/templates', '/apps/discovered', '/apps/victim/logs?tail=1000', '/apps/victim/stats', '/apps/victim/docs']) {
        const r = await call(reader, 'GET', p);
        expect(r.status, `${p}: ${r.text}`).to.equal(200);
        expect(r.text, p).to.not.include(SECRET);
        guard.assertNotLeaked(r.text, p);
      }
      const v = (await call(reader, 'GET', '/apps')).body.apps.find((a: any) => a.app_id === 'victim');
      expect(v).to.not.have.property('compose_content');
      expect(v.compose_sha256).to.match(/^[0-9a-f]{64}$/);
      const logs = (await call(reader, 'GET', '/apps/victim/logs')).body.lines.map((l: any) => l.text);
      expect(logs).to.include('victim up');
    });

    it('changes nothing: every mutating call is 403', async () => {
      const tries: Array<[string, string, unknown]> = [
        ['POST', '/apps', { template_id: 'custom', compose_content: attack('') }],
        ['PATCH', '/apps/victim/compose', { compose_content: attack('') }],
        ['PATCH', '/apps/victim/folders', { folder_assignments: [] }],
        ['POST', '/apps/victim/actions', { action: 'stop' }],
        ['POST', '/apps/victim/move', { storage_id: 'p2' }],
        ['PUT', '/apps/victim/docs', { content: 'x' }],
        ['DELETE', '/apps/victim', undefined],
      ];
      for (const [m, p, body] of tries) {
        const r = await call(reader, m, p, body);
        expect(r.status, `${m} ${p}`).to.equal(403);
        expect(r.body.error).to.match(/^token 'esc-apps-read' lacks scope 'apps\.manage' needed by apps_/);
      }
      expect((await call(admin, 'GET', '/apps')).body.apps.find((a: any) => a.app_id === 'victim').state).to.equal('running');
    });
  });

  describe('an app stored before the rules (as an upgrade finds it)', () => {
    it('is kept and listed, refused with 409 at start, and never sets the host kernel', async () => {
      const ok = await call(admin, 'POST', '/apps', { template_id: 'custom', name: 'legacy', compose_content: webCompose(lab.image, 18700) });
      expect(ok.status, ok.text).to.equal(201);
      expect((await call(admin, 'POST', '/apps/legacy/actions', { action: 'stop' })).status).to.equal(200);
      await d.stop();
      // What an older version stored: a non-namespaced sysctl (it answered 500 then; the content stayed).
      const content = `services:\n  web:\n    image: ${lab.image}\n    init: true\n    command: ["sleep", "3600"]\n    sysctls: {kernel.core_pattern: "|/bin/sh -c ${MARKER}"}\n`;
      const sha = crypto.createHash('sha256').update(content).digest('hex');
      const store = await Store.open(path.join(d.dataDir, 'db'));
      try {
        const recs = store.sub<any>('apps');
        await recs.put('legacy', { ...(await recs.get('legacy')), compose_sha256: sha });
        await store.sub<any>('apps_content').put('legacy', { content, sha256: sha });
      } finally {
        await store.close();
      }
      d = await labDaemon(lab, { dataDir: d.dataDir });
      const why =
        "compose_content: services.web.sysctls: sysctl 'kernel.core_pattern' is refused: it is not namespaced (it would set the host's kernel); accepted are net.*, fs.mqueue.*, kernel.msgmax, kernel.msgmnb, kernel.msgmni, kernel.sem, kernel.shmall, kernel.shmmax, kernel.shmmni, kernel.shm_rmid_forced";
      const listed = (await call(admin, 'GET', '/apps')).body.apps.find((a: any) => a.app_id === 'legacy');
      expect(listed).to.deep.include({ refused: why, compose_sha256: sha });
      await eventually(() => d.logs.some((l) => l.app_id === 'legacy' && l.refused === why), 30_000, "the log line naming the legacy app's refusal");
      const refusal = `app 'legacy' is refused: its stored compose file breaks a rule added since it was installed (${why}); nothing was changed or removed: replace the file with PATCH /apps/legacy/compose`;
      expectError(await call(manager, 'POST', '/apps/legacy/actions', { action: 'start' }), 409, refusal);
      expectError(await call(manager, 'POST', '/apps/legacy/actions', { action: 'restart' }), 409, refusal);
      expectError(await call(manager, 'POST', '/apps/legacy/move', { storage_id: 'p2' }), 409, refusal);
      expect(fs.existsSync(path.join(lab.pools.p1, '.hostd-apps', 'legacy'))).to.equal(true);
      expect(rootProcessesWith(MARKER)).to.deep.equal([]);
      // Accepted content clears it.
      const fixed = await call(manager, 'PATCH', '/apps/legacy/compose', { compose_content: webCompose(lab.image, 18700) });
      expect(fixed.status, fixed.text).to.equal(200);
      expect(fixed.body.app.refused).to.equal(null);
      expect((await call(manager, 'DELETE', '/apps/legacy')).status).to.equal(200);
    });
  });
});
