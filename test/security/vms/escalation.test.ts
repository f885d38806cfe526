/**
 * The escalation suite, VM and sandbox part (docs/security.md, "VMs,
 * templates, tasks" and "Sandboxes"): one token per scope, the known attempts
 * against the real runtime, each with its exact status, and after every test
 * the host checked: sentinels outside every root and in the VM domain's own
 * directories unread and unchanged, core_pattern unchanged, no new mount of
 * ours, no process carrying the attempt's marker running as host root, no
 * file made by an injected command.
 *
 * The attempts that need no guest run first; then a blank sandbox (its QEMU
 * finds nothing to boot) for ownership; then one Debian guest for what a
 * token reaches from inside it. Never two QEMU guests at once.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { expect } from 'chai';
import { run } from '../../../daemon/lib/run.js';
import { HostGuard, hostMounts } from '../../helpers/host-guard.js';
import { eventually } from '../../helpers/daemon.js';
import { attempts } from '../../helpers/escalation-calls.js';
import { killGuests, requireVmsRuntime, qemuPids, settle, startVmsDaemon, untilReady, type VmsEnv } from '../../helpers/vms-fixture.js';
import { importBlank, importImages } from '../../helpers/sandboxes-fixture.js';

const BOOT_S = 900;
const MARKER = `hostd-esc-${crypto.randomBytes(4).toString('hex')}`;
/** A file an injected command would make. */
const PWNED = `/tmp/${MARKER}`;

describe('escalation: VM and sandbox scopes against QEMU', function () {
  this.timeout(40 * 60_000);
  let e: VmsEnv;
  const guard = new HostGuard();
  const tokens: Record<string, string> = {};
  let mountsBefore = new Set<string>();
  let outside = '';
  const readCore = fs.readFileSync('/proc/sys/kernel/core_pattern', 'utf8');

  /** `answers`: every answer the attempts got; none may hold a sentinel's secret. */
  const { answers, call, refused, ok } = attempts(
    () => e.d,
    () => tokens,
  );
  const lacks = (who: string, scopes: string, op: string) => `token '${who}' lacks scope ${scopes} needed by ${op}`;

  before(async function () {
    await requireVmsRuntime(this);
    // The host's defaults, user networking included (the fixture's other tests restrict it explicitly).
    e = await startVmsDaemon({ userNetRestrict: 'default' });
    for (const [name, scopes] of Object.entries({
      reader: ['vm.read'],
      manager: ['vm.manage'],
      executor: ['vm.exec'],
      operator: ['vm.read', 'vm.manage', 'vm.exec'],
      sreader: ['sandbox.read'],
      sowner: ['sandbox.read', 'sandbox.manage'],
      sother: ['sandbox.read', 'sandbox.manage'],
    }))
      tokens[name] = await e.d.token(name, scopes);
    await importImages(e, 'deb12', false);
    await importBlank(e);
    outside = path.join(e.root, 'outside');
    guard.plant(outside, path.join(e.pools.p1, '.vms'), path.join(e.pools.p1, '.vms', 'images'), path.join(e.pools.p2, '.vms'), path.join(e.d.dataDir, 'vms'));
    guard.snapshot();
    mountsBefore = hostMounts();
  });

  afterEach(function () {
    if (!e) return;
    guard.assertIntact();
    for (const a of answers) guard.assertNotLeaked(a, 'an answer');
    expect(fs.existsSync(PWNED), `${PWNED} was made`).to.equal(false);
    guard.assertNoRootProcess(MARKER);
    expect(fs.readFileSync('/proc/sys/kernel/core_pattern', 'utf8'), 'kernel.core_pattern changed').to.equal(readCore);
    // Other engineers' tests mount and unmount on this host meanwhile: the mounts checked are
    // those under this test's own root (where hostd works) and outside the test areas.
    const added = [...hostMounts()].filter((m) => !mountsBefore.has(m) && (m.startsWith(e.root) || !/^\/(tmp|run|var\/lib|sys\/fs\/cgroup|proc)\//.test(m)));
    expect(added, 'new mounts').to.deep.equal([]);
  });

  after(async function () {
    guard.remove();
    if (e) await killGuests(e.root);
  });

  // ---------------------------------------------------------------- scopes

  it('each scope reaches only its own operations (403 naming the scope)', async () => {
    await refused('reader', 'POST', '/vms', { name: 'x', image_id: 'deb12' }, 403, lacks('reader', "'vm.manage'", 'vms_create'));
    await refused('executor', 'POST', '/vms', { name: 'x', image_id: 'deb12' }, 403, lacks('executor', "'vm.manage'", 'vms_create'));
    await refused('manager', 'POST', '/vms/1/exec', { command: 'id' }, 403, lacks('manager', "'vm.exec'", 'vms_exec'));
    await refused('reader', 'POST', '/vms/1/exec', { command: 'id' }, 403, lacks('reader', "'vm.exec'", 'vms_exec'));
    await refused('manager', 'GET', '/vms', undefined, 403, lacks('manager', "'vm.read'", 'vms_list'));
    // A template build runs user-data as root in a VM and its image serves sandboxes: it needs both manage scopes.
    await refused('manager', 'POST', '/templates', { base_image_id: 'deb12', name: 't' }, 403, lacks('manager', "'sandbox.manage'", 'templates_create'));
    await refused('sowner', 'POST', '/templates', { base_image_id: 'deb12', name: 't' }, 403, lacks('sowner', "'vm.manage'", 'templates_create'));
    await refused('sowner', 'GET', '/vms', undefined, 403, lacks('sowner', "'vm.read'", 'vms_list'));
    await refused('sreader', 'POST', '/sandboxes', { image_id: 'blank' }, 403, lacks('sreader', "'sandbox.manage'", 'sandboxes_create'));
    await refused('reader', 'GET', '/sandboxes', undefined, 403, lacks('reader', "'sandbox.read'", 'sandboxes_list'));
  });

  // ---------------------------------------------------------------- vm.manage: cloud-init injection

  it('vm.manage: no cloud-init injection through username, ssh_public_key, dns_servers, ip_address, gateway (400)', async () => {
    const yaml = `\nruncmd: [[touch, ${PWNED}]]`;
    await refused(
      'manager',
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', username: `alice${yaml}` },
      400,
      "argument 'username' must be a Linux user name (lowercase letter or _, then up to 31 of [a-z0-9_-])",
    );
    const keyMsg = "argument 'ssh_public_key' must be one OpenSSH public key line (ssh-ed25519 AAAA... comment)";
    for (const brk of ['\n', '\r', '\u2028', '\u2029', '\u0085']) {
      await refused(
        'manager',
        'POST',
        '/vms',
        { name: 'x', image_id: 'deb12', ssh_public_key: `ssh-ed25519 AAAAC3Nza me${brk}runcmd: [[touch, ${PWNED}]]` },
        400,
        keyMsg,
      );
    }
    await refused(
      'manager',
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', dns_servers: [`1.1.1.1${yaml}`] },
      400,
      "argument 'dns_servers[0]' must be an IPv4 or IPv6 address",
    );
    await refused(
      'manager',
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', ip_address: `10.0.0.5/24${yaml}` },
      400,
      "argument 'ip_address' must be an IPv4 or IPv6 address with an optional /prefix (1-32 or 1-128), or empty",
    );
    await refused(
      'manager',
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', gateway: `$(touch ${PWNED})` },
      400,
      /^argument 'gateway' must be an IPv4 or IPv6 address/,
    );
    await refused(
      'manager',
      'POST',
      '/vms',
      { name: `x\n${MARKER}`, image_id: 'deb12' },
      400,
      "argument 'name' must be a name of 1-128 characters without control characters, '/' or '\\', with no space at either end, not '.' or '..'",
    );
    // The seed a stored VM gets stays what was asked: cloud-init's own loader finds no key of ours.
    await ok(
      'manager',
      'POST',
      '/vms',
      { name: 'Inject Probe', image_id: 'deb12', vmid: 400, linked_clone: true, username: 'alice', dns_servers: ['10.0.0.53'] },
      201,
    );
    await refused(
      'manager',
      'POST',
      '/vms/400/cloud-init',
      { username: `bob${yaml}` },
      400,
      "argument 'username' must be a Linux user name (lowercase letter or _, then up to 31 of [a-z0-9_-])",
    );
    await refused(
      'manager',
      'POST',
      '/vms/400/cloud-init',
      { dns_servers: ['10.0.0.53', `8.8.8.8${yaml}`] },
      400,
      /^argument 'dns_servers\[1\]' must be an IPv4 or IPv6 address/,
    );
    await ok('manager', 'POST', '/vms/400/cloud-init', { ssh_public_key: 'ssh-ed25519 AAAAC3Nza me: "x" [y] {z} #c &a *b', password: `pw${yaml}` });
    const iso = path.join(e.pools.p1, '.vms', 'vm-400', 'seed.iso');
    const ud = await run('isoinfo', ['-R', '-i', iso, '-x', '/user-data'], { timeoutMs: 30_000, install: 'the genisoimage package' });
    const parsed = await run('python3', ['-c', 'import sys, json, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))'], {
      input: ud.stdout,
      timeoutMs: 30_000,
    });
    const u = JSON.parse(parsed.stdout);
    expect(Object.keys(u).sort()).to.deep.equal(['hostname', 'manage_etc_hosts', 'package_upgrade', 'ssh_deletekeys', 'ssh_pwauth', 'users']);
    expect(u.users[0].ssh_authorized_keys).to.deep.equal(['ssh-ed25519 AAAAC3Nza me: "x" [y] {z} #c &a *b']);
    expect(u.users[0].passwd).to.match(/^\$6\$/);
    expect(ud.stdout).to.not.include(MARKER);
  });

  it('vm.manage: a VM joins only the bridges the host gives VMs; bridge names are never commands (403/400)', async () => {
    const notAllowed = (b: string) => `bridge '${b}' is not one VMs may join (allowed: none; the settings vms.bridge and vms.allowed_bridges list them)`;
    for (const b of ['lo', 'eth0', 'docker0', 'lxcbr0'])
      await refused('manager', 'POST', '/vms/400/cloud-init', { network_type: 'bridged', network_bridge: b }, 403, notAllowed(b));
    const bad = "argument 'network_bridge' must be an interface name (1-15 of [A-Za-z0-9_.-], not '.' or '..'), or empty, or null";
    for (const b of ['b;reboot', "br0'$(id)'", '$(id)', '..', '.', 'br0 up', 'a/b'])
      await refused('manager', 'POST', '/vms/400/cloud-init', { network_type: 'bridged', network_bridge: b }, 400, bad);
    // Too long (a command that would write a file, or plain letters): the length is named, as for LXC's bridges (one wording for one rule).
    for (const b of [`br0;touch ${PWNED}`, 'x'.repeat(16)])
      await refused(
        'manager',
        'POST',
        '/vms/400/cloud-init',
        { network_type: 'bridged', network_bridge: b },
        400,
        "argument 'network_bridge' must be at most 15 characters",
      );
    expect((await ok('operator', 'GET', '/vms/400')).vm.network).to.deep.include({ type: 'user', bridge: null });
    expect(fs.readdirSync(path.join(e.d.dataDir, 'vms')).filter((f) => f.startsWith('ifup-'))).to.deep.equal([]);
  });

  it('vm.manage: ids and pools with .. or slashes name nothing (404/400), and reach no file', async () => {
    const up = encodeURIComponent('../../../etc/passwd');
    await refused(
      'manager',
      'POST',
      '/vms',
      { name: 'x', image_id: '../../../etc/passwd' },
      400,
      "argument 'image_id' must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit, without '..'",
    );
    await refused(
      'manager',
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', storage_id: '../p2' },
      404,
      "storage pool '../p2' not found (argument 'storage_id')",
    );
    await refused(
      'manager',
      'DELETE',
      `/vms/images/${up}`,
      undefined,
      400,
      "argument 'image_id' must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit, without '..'",
    );
    await refused(
      'manager',
      'POST',
      '/vms/images/deb12/move',
      { source_storage_id: 'p1', target_storage_id: `../../${outside}` },
      404,
      `storage pool '../../${outside}' not found (argument 'target_storage_id')`,
    );
    await refused(
      'manager',
      'POST',
      `/vms/isos/${up}/move`,
      { source_storage_id: 'p1', target_storage_id: 'p2' },
      400,
      "argument 'iso_id' must be 1-128 of [A-Za-z0-9_.+-], starting with a letter or digit, without '..'",
    );
    await refused(
      'manager',
      'POST',
      `/vms/isos/${encodeURIComponent('../x.iso')}/move`,
      { source_storage_id: 'p1', target_storage_id: 'p2' },
      400,
      "argument 'iso_id' must be 1-128 of [A-Za-z0-9_.+-], starting with a letter or digit, without '..'",
    );
    await refused('manager', 'POST', `/vms/warm-states/${up}`, { name: 'x' }, 404, "warm state '../../../etc/passwd' not found");
    await refused('manager', 'DELETE', `/vms/warm-states/${up}`, undefined, 404, "warm state '../../../etc/passwd' not found");
    await refused('manager', 'PATCH', `/vms/400/disks/${up}`, { size_gb: 2 }, 404, "VM 400 has no disk '../../../etc/passwd'");
    await refused('manager', 'DELETE', `/vms/400/disks/${up}`, undefined, 404, "VM 400 has no disk '../../../etc/passwd'");
  });

  it('vm.manage: huge CPU, memory and disk values are 400 (bounded by the host), never a daemon allocation', async () => {
    const big = 4294967295;
    await refused('manager', 'POST', '/vms', { name: 'x', image_id: 'deb12', cpu_cores: big }, 400, "argument 'cpu_cores' must be at most 255");
    await refused(
      'manager',
      'POST',
      '/vms',
      { name: 'x', image_id: 'deb12', memory_mb: big },
      400,
      /^argument 'memory_mb' \(4294967295\) is more than the host's \d+ MiB$/,
    );
    await refused('manager', 'POST', '/vms', { name: 'x', image_id: 'deb12', disk_size_gb: big }, 400, "argument 'disk_size_gb' must be <= 65536");
    await refused('manager', 'PATCH', '/vms/400', { cpu_cores: big }, 400, "argument 'cpu_cores' must be at most 255");
    await refused('manager', 'PATCH', '/vms/400', { memory_mb: big }, 400, /^argument 'memory_mb' \(4294967295\) is more than the host's \d+ MiB$/);
    await refused('manager', 'POST', '/vms/400/disks', { size_gb: big }, 400, "argument 'size_gb' must be <= 65536");
    await refused('manager', 'POST', '/vms', { name: 'x', image_id: 'deb12', vmid: 0 }, 400, "argument 'vmid' must be 1-999999999");
    expect((await ok('operator', 'GET', '/vms/400')).vm).to.include({ cpu_cores: 1, memory_mb: 512 });
  });

  it('vm.manage: no disk rests on a host file: an overlay on one is refused at import, at create and at start (409)', async () => {
    const hostFile = guard.sentinels.find((s) => s.file.startsWith(outside))!.file;
    // An operator importing such an overlay: the task fails, no image.
    const overlay = path.join(outside, 'overlay.qcow2');
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', 'raw', '-b', hostFile, overlay, '64M'], { timeoutMs: 30_000 });
    const imp = await e.d.admin.request('POST', '/admin/vms/images/import', { file: overlay, image_id: 'evil' });
    expect(imp.status, JSON.stringify(imp.body)).to.equal(201);
    const t = await settle(e, imp.body.task.task_id);
    expect(t.state).to.equal('failed');
    expect(t.error).to.equal(`backing file '${hostFile}' of ${overlay} is outside the storage pools' VM directories (hostd opens no disk elsewhere)`);
    expect((await ok('operator', 'GET', '/vms/images')).images.map((i: any) => i.image_id).sort()).to.deep.equal(['blank', 'deb12']);
    // An image file swapped for such an overlay (made before the rule, or by hand): nothing opens it.
    const blankFile = path.join(e.pools.p1, '.vms', 'images', 'blank.qcow2');
    const keep = `${blankFile}.keep`;
    fs.renameSync(blankFile, keep);
    try {
      await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', 'raw', '-b', hostFile, blankFile, '1G'], { timeoutMs: 30_000 });
      const outsidePools = "is outside the storage pools' VM directories (hostd opens no disk elsewhere)";
      const why = `backing file '${hostFile}' of ${blankFile} ${outsidePools}`;
      await refused('manager', 'POST', '/vms', { name: 'x', image_id: 'blank', vmid: 401, linked_clone: true }, 409, `image 'blank' cannot be used: ${why}`);
      const full = await ok('manager', 'POST', '/vms', { name: 'x', image_id: 'blank', vmid: 402 }, 201);
      const ft = await settle(e, full.task.task_id);
      expect([ft.state, ft.error]).to.deep.equal(['failed', why]);
      await refused('operator', 'GET', '/vms/402', undefined, 404, 'VM 402 not found');
      // A VM that already rests on it is not started.
      fs.renameSync(blankFile, `${blankFile}.evil`);
      fs.renameSync(keep, blankFile);
      await ok('manager', 'POST', '/vms', { name: 'x', image_id: 'blank', vmid: 403, linked_clone: true }, 201);
      fs.renameSync(blankFile, keep);
      fs.renameSync(`${blankFile}.evil`, blankFile);
      const root403 = path.join(e.pools.p1, '.vms', 'vm-403', 'root.qcow2');
      await refused('manager', 'POST', '/vms/403/start', {}, 409, `VM 403 was not started: backing file '${hostFile}' of ${root403} ${outsidePools}`);
      expect(qemuPids(e.root)).to.deep.equal([]);
    } finally {
      fs.rmSync(blankFile, { force: true });
      fs.renameSync(keep, blankFile);
    }
    await ok('manager', 'DELETE', '/vms/403');
    // Nothing was copied out of the host file: no file hostd wrote is left but the VM of the
    // earlier tests, the two images and the sentinels, and none of those small enough to read holds it.
    const secret = guard.sentinels.find((s) => s.file === hostFile)!.secret;
    const files = walk(e.pools.p1)
      .concat(walk(e.pools.p2))
      .filter((f) => !guard.sentinels.some((s) => s.file === f));
    expect(
      files
        .map((f) => path.relative(e.root, f))
        .filter((f) => !f.startsWith('pool1/.vms/vm-400/'))
        .sort(),
    ).to.deep.equal(['pool1/.vms/images/blank.qcow2', 'pool1/.vms/images/deb12.qcow2']);
    for (const f of files) {
      if (f.endsWith('deb12.qcow2')) continue;
      expect(fs.readFileSync(f).includes(Buffer.from(secret)), `${f} holds the host file`).to.equal(false);
    }
  });

  it('vm.read: sees VMs but no secret (the cloud-init password is never returned), and runs nothing', async () => {
    const v = await ok('reader', 'GET', '/vms/400');
    expect(v.vm.cloud_init.password_set).to.equal(true);
    const text = JSON.stringify(v) + JSON.stringify(await ok('reader', 'GET', '/vms')) + JSON.stringify(await ok('reader', 'GET', '/vms/400/connection'));
    expect(text).to.not.include('$6$');
    expect(text).to.not.include('pw\n');
    expect(Object.keys(v.vm.cloud_init)).to.not.include('password');
    await refused('reader', 'POST', '/vms/400/start', {}, 403, lacks('reader', "'vm.manage'", 'vms_start'));
    await refused('reader', 'POST', '/vms/400/cloud-init', { password: 'x' }, 403, lacks('reader', "'vm.manage'", 'vms_cloud_init_update'));
  });

  // ---------------------------------------------------------------- sandboxes

  it('sandboxes: another token gets 404 for everything of a sandbox it does not own; /vms never shows it', async () => {
    const made = await ok('sowner', 'POST', '/sandboxes', { image_id: 'blank', name: 'mine' }, 201);
    const id = made.sandbox.id;
    const msg = `sandbox '${id}' not found`;
    await refused('sother', 'GET', `/sandboxes/${id}`, undefined, 404, msg);
    await refused('sother', 'POST', `/sandboxes/${id}/wait`, { timeout_seconds: 0 }, 404, msg);
    await refused('sother', 'POST', `/sandboxes/${id}/suspend`, {}, 404, msg);
    await refused('sother', 'POST', `/sandboxes/${id}/resume`, {}, 404, msg);
    await refused('sother', 'DELETE', `/sandboxes/${id}`, undefined, 404, msg);
    expect((await ok('sother', 'GET', '/sandboxes?include_destroyed=true')).sandboxes).to.deep.equal([]);
    await refused(
      'sother',
      'POST',
      '/sandboxes',
      { image_id: '../../../etc/passwd' },
      400,
      "argument 'image_id' must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit, without '..'",
    );
    await refused(
      'sother',
      'POST',
      '/sandboxes',
      { image_id: 'blank', resources: { cpu_cores: 4294967295 } },
      400,
      "argument 'resources.cpu_cores' must be at most 255",
    );
    await refused('sother', 'POST', '/sandboxes', { image_id: 'blank', resources: { memory_mb: 4294967295 } }, 409, /^the host cannot fit this sandbox now/);
    // Its VM is not a VM of /vms, for any VM token.
    const vmid = await eventually(async () => (await ok('sowner', 'GET', `/sandboxes/${id}`)).sandbox.vmid ?? undefined, 120_000, 'the sandbox VM');
    await refused('operator', 'GET', `/vms/${vmid}`, undefined, 404, `VM ${vmid} not found`);
    await refused('operator', 'POST', `/vms/${vmid}/exec`, { command: 'id' }, 404, `VM ${vmid} not found`);
    await refused('operator', 'DELETE', `/vms/${vmid}`, undefined, 404, `VM ${vmid} not found`);
    expect((await ok('operator', 'GET', '/vms')).vms.map((v: any) => v.vmid)).to.not.include(vmid);
    expect((await ok('sowner', 'DELETE', `/sandboxes/${id}`)).sandbox.state).to.equal('destroyed');
    await eventually(() => qemuPids(e.root).length === 0, 60_000, 'the sandbox QEMU to end');
  });

  // ---------------------------------------------------------------- from inside a guest

  describe('from inside a running guest (vm.exec)', function () {
    let listener: net.Server;
    let port = 0;
    const seen: string[] = [];

    before(async function () {
      if (!e) this.skip();
      listener = net.createServer((s) => {
        seen.push(String(s.remoteAddress));
        s.end('hello from the host loopback\n');
      });
      await new Promise<void>((r) => listener.listen(0, '127.0.0.1', () => r()));
      port = (listener.address() as net.AddressInfo).port;
      await ok('operator', 'POST', '/vms/400/cloud-init', { clear_password: true });
      await ok('manager', 'POST', '/vms/400/start', {});
      await untilReady(e, 400, BOOT_S);
    });

    after(async () => {
      if (listener) await new Promise<void>((r) => listener.close(() => r()));
      if (e) await call('operator', 'DELETE', '/vms/400');
    });

    const inGuest = async (command: string) => ok('executor', 'POST', '/vms/400/exec', { command, timeout_seconds: 120 });

    it("is root in the guest only: the host's files, processes and sentinels are not there", async () => {
      const r = await inGuest(`id -u; cat ${guard.sentinels.map((s) => s.file).join(' ')} 2>&1; touch ${PWNED}; echo ${MARKER}`);
      expect(r.exit_code).to.equal(0);
      expect(r.stdout.split('\n')[0]).to.equal('0');
      guard.assertNotLeaked(r.stdout + r.stderr, 'the guest');
      expect(fs.existsSync(PWNED)).to.equal(false);
    });

    it("reaches no service on the host's loopback (user networking is restricted by default)", async () => {
      // The guest is on the network (so that a refused connection means the restriction, not a card that is down):
      // its DHCP lease from QEMU's slirp and a route to the gateway.
      await eventually(
        async () => /inet 10\.0\.2\.15\//.test((await inGuest('ip -4 -o addr show scope global')).stdout),
        300_000,
        "the guest's DHCP address 10.0.2.15",
      );
      expect((await inGuest('ip -4 route get 10.0.2.2')).stdout).to.match(/^10\.0\.2\.2 dev \S+ src 10\.0\.2\.15/);
      // 10.0.2.2 is QEMU's slirp alias of the host's 127.0.0.1.
      const r = await inGuest(`timeout 10 bash -c 'exec 3<>/dev/tcp/10.0.2.2/${port}; cat <&3' 2>&1; echo rc=$?`);
      expect(r.stdout).to.not.include('hello from the host loopback');
      expect(r.stdout).to.match(/rc=[1-9]\d*\n$/);
      const api = new URL(e.d.url).port;
      const r2 = await inGuest(
        `timeout 10 bash -c 'exec 3<>/dev/tcp/10.0.2.2/${api}; printf "GET /api/v1/catalog HTTP/1.0\\r\\n\\r\\n" >&3; cat <&3' 2>&1; echo rc=$?`,
      );
      expect(r2.stdout).to.not.match(/HTTP\/1\.[01] /);
      expect(seen).to.deep.equal([]);
    });

    it('keeps the QMP and guest-agent sockets in directories only root can enter', async () => {
      for (const d of [path.join(e.d.dataDir, 'run'), path.join(e.d.dataDir, 'run', 'vm-400')]) {
        const st = fs.statSync(d);
        expect([st.uid, st.mode & 0o777], d).to.deep.equal([0, 0o700]);
      }
      expect(
        fs
          .readdirSync(path.join(e.d.dataDir, 'run', 'vm-400'))
          .filter((f) => f.endsWith('.sock'))
          .sort(),
      ).to.deep.equal(['qga.sock', 'qmp.sock']);
    });

    it('vm.exec cannot change what the VM is: no cloud-init, start, stop or delete', async () => {
      await refused('executor', 'POST', '/vms/400/cloud-init', { network_type: 'none' }, 403, lacks('executor', "'vm.manage'", 'vms_cloud_init_update'));
      await refused('executor', 'DELETE', '/vms/400', undefined, 403, lacks('executor', "'vm.manage'", 'vms_delete'));
      await refused('executor', 'POST', '/vms/400/warm-states', {}, 403, lacks('executor', "'vm.manage'", 'vms_warm_states_create'));
    });
  });
});

/** Every regular file under `dir`. */
function walk(dir: string): string[] {
  const out: string[] = [];
  if (!fs.existsSync(dir)) return out;
  for (const d of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, d.name);
    if (d.isDirectory()) out.push(...walk(p));
    else if (d.isFile()) out.push(p);
  }
  return out;
}
