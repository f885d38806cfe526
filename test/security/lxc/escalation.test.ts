/**
 * The LXC part of the escalation suite: one token per LXC scope (lxc.read,
 * lxc.manage, lxc.exec, and lxc.manage + lxc.exec), every known way out of
 * the domain tried against the real LXC, each with its exact status, and
 * after every attempt the host guard's checks: sentinels outside every root
 * and in every domain's internal directory unread and unchanged,
 * /proc/sys/kernel/core_pattern and the cgroup release agents unchanged, no
 * new host mount, no process of the attempt left running as host root.
 *
 * This host has no AppArmor: what holds here holds on the user namespace,
 * the dropped capabilities and seccomp alone.
 */
import { expect } from 'chai';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { HostGuard, hostMounts } from '../../helpers/host-guard.js';
import { tempDir, type Reply } from '../../helpers/daemon.js';
import { cleanupLxc, lxcEnv, requireLxc, type LxcEnv } from '../../helpers/lxc-env.js';
import { MOUNT_RULE } from '../../../daemon/lxc/containment.js';

/** release_agent of every v1 hierarchy (what the cgroup escape writes). */
function releaseAgents(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const c of fs.readdirSync('/sys/fs/cgroup')) {
    const f = path.join('/sys/fs/cgroup', c, 'release_agent');
    try {
      out[c] = fs.readFileSync(f, 'utf8');
    } catch {
      /* not a v1 hierarchy root */
    }
  }
  return out;
}

describe('security: LXC escalation attempts, one token per scope', function () {
  this.timeout(600_000);
  let env: LxcEnv;
  const guard = new HostGuard();
  const tok = { read: '', manage: '', exec: '', both: '' };
  let share: { folder_id: string; path: string };
  let outside: string;
  let victim: number;
  let mountsBefore = new Set<string>();
  let agentsBefore: Record<string, string> = {};
  /** Directories this suite made: a new mount at or below any of them is the suite's. */
  let ours: string[] = [];

  const as =
    (token: string) =>
    (method: string, p: string, body?: unknown): Promise<Reply> =>
      env.req(method, p, body, token);
  const expectError = (r: Reply, status: number, error: string, what = '') => {
    expect(r.status, `${what} ${JSON.stringify(r.body)}`).to.equal(status);
    expect(r.body, what).to.deep.equal({ error });
  };
  const scopeRefusal = (name: string, scope: string, op: string) => `token '${name}' lacks scope '${scope}' needed by ${op}`;
  const execAs = async (token: string, id: number, command: string, timeout_seconds = 60) => {
    const r = await as(token)('POST', `/lxc/${id}/exec`, { command, timeout_seconds });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body as { exit_code: number | null; stdout: string; stderr: string; truncated: boolean; timed_out: boolean };
  };
  /** Every config hostd rendered (an injected key would land there). */
  const configsText = () => {
    const dir = path.join(env.d.dataDir, 'lxc');
    return fs
      .readdirSync(dir)
      .filter((n) => n.startsWith('svc-lxc-'))
      .map((n) => fs.readFileSync(path.join(dir, n, 'config'), 'utf8'))
      .join('\n');
  };

  before(async function () {
    await requireLxc(this);
    env = await lxcEnv();
    tok.read = await env.d.token('esc-read', ['lxc.read']);
    tok.manage = await env.d.token('esc-manage', ['lxc.manage']);
    tok.exec = await env.d.token('esc-exec', ['lxc.exec']);
    tok.both = await env.d.token('esc-both', ['lxc.manage', 'lxc.exec']);
    share = await env.folder('share');
    fs.chownSync(share.path, 100000, 100000);
    outside = tempDir('hostd-esc-outside-');
    const pool = env.pools.p1;
    // What other domains keep in the pool (made here if those domains have not run): the targets of the mount attack.
    const internals = ['.hostd-lxc', '.hostd-apps/app-1', '.vms/images', '.hostd-sandboxes'].map((d) => path.join(pool, d));
    guard.plant(outside, env.d.dataDir, ...internals);
    ours = [pool, env.d.dataDir, outside];
    guard.snapshot();
    mountsBefore = hostMounts();
    agentsBefore = releaseAgents();
    const c = await as(tok.both)('POST', '/lxc', {
      name: 'victim',
      template: 'bb',
      mount_points: [{ host_path: share.path, container_path: '/mnt/share', read_only: false }],
    });
    expect(c.status, JSON.stringify(c.body)).to.equal(201);
    victim = c.body.container.lxcid;
    expect((await as(tok.both)('POST', `/lxc/${victim}/start`)).status).to.equal(200);
  });
  after(async () => {
    await cleanupLxc();
    guard.remove();
  });

  afterEach(function () {
    if (!env) return;
    guard.assertIntact();
    expect(releaseAgents(), 'a cgroup release_agent changed').to.deep.equal(agentsBefore);
    // Other engineers' tests run beside this one and mount under their own temp dirs and /run/netns:
    // those are theirs. Any new mount under this suite's dirs, or anywhere else on the host, fails.
    const theirs = [...hostMounts()].filter(
      (m) => !mountsBefore.has(m) && (m.startsWith('/run/netns/') || (m.startsWith(os.tmpdir() + '/') && !ours.some((o) => m === o || m.startsWith(o + '/')))),
    );
    guard.assertHostUnchanged(theirs);
  });

  it('lxc.read alone reads, and cannot create, change, start, stop or exec (403)', async () => {
    const read = as(tok.read);
    expect((await read('GET', '/lxc')).status).to.equal(200);
    expect((await read('GET', `/lxc/${victim}`)).status).to.equal(200);
    expect((await read('GET', '/lxc/host-status')).status).to.equal(200);
    expectError(await read('POST', '/lxc', { name: 'x', template: 'bb' }), 403, scopeRefusal('esc-read', 'lxc.manage', 'lxc_create'));
    expectError(await read('PATCH', `/lxc/${victim}`, { nesting: true }), 403, scopeRefusal('esc-read', 'lxc.manage', 'lxc_update'));
    expectError(await read('POST', `/lxc/${victim}/stop`), 403, scopeRefusal('esc-read', 'lxc.manage', 'lxc_stop'));
    expectError(await read('POST', `/lxc/${victim}/exec`, { command: 'id' }), 403, scopeRefusal('esc-read', 'lxc.exec', 'lxc_exec'));
  });

  it('lxc.exec alone cannot create or start; lxc.manage alone cannot exec (403)', async () => {
    expectError(await as(tok.exec)('POST', '/lxc', { name: 'x', template: 'bb', privileged: true }), 403, scopeRefusal('esc-exec', 'lxc.manage', 'lxc_create'));
    expectError(await as(tok.exec)('POST', `/lxc/${victim}/start`), 403, scopeRefusal('esc-exec', 'lxc.manage', 'lxc_start'));
    expectError(await as(tok.manage)('POST', `/lxc/${victim}/exec`, { command: 'id' }), 403, scopeRefusal('esc-manage', 'lxc.exec', 'lxc_exec'));
  });

  it('a privileged container, alone or with nesting, is 403 naming lxc.allow_privileged; PATCH has no privileged argument (400)', async () => {
    for (const token of [tok.manage, tok.both]) {
      expectError(
        await as(token)('POST', '/lxc', { name: 'root-me', template: 'bb', privileged: true }),
        403,
        "argument 'privileged': privileged containers are turned off on this host (lxc.allow_privileged is false); a privileged container is root on the host",
      );
      expectError(
        await as(token)('POST', '/lxc', { name: 'root-me', template: 'bb', privileged: true, nesting: true }),
        403,
        "argument 'privileged' (with nesting): privileged containers are turned off on this host (lxc.allow_privileged is false); a privileged container is root on the host",
      );
    }
    expectError(await as(tok.both)('PATCH', `/lxc/${victim}`, { privileged: true }), 400, "unknown argument 'privileged'");
    const list = (await as(tok.read)('GET', '/lxc')).body.containers;
    expect(list.map((c: { name: string }) => c.name)).to.deep.equal(['victim']);
    expect(list[0].privileged).to.equal(false);
  });

  it("host_path outside the managed folders is 400: pool root, every domain's internal dirs, /etc, a symlink out, '..', the data dir, another container's rootfs", async () => {
    const pool = env.pools.p1;
    fs.symlinkSync(outside, path.join(share.path, 'link-out'));
    fs.symlinkSync(path.join(pool, '.hostd-apps'), path.join(share.path, 'link-apps'));
    try {
      const cases: Array<[string, string]> = [
        [pool, 'is a storage pool root or holds one (every domain keeps its files there)'],
        // The temp dir holding the pool holds the data dir too.
        [path.dirname(pool), "is or holds hostd's data directory"],
        [path.join(pool, '.hostd-apps'), "is inside a directory hostd keeps for itself ('.hostd-apps')"],
        [path.join(pool, '.hostd-apps/app-1'), "is inside a directory hostd keeps for itself ('.hostd-apps')"],
        [path.join(pool, '.vms'), "is inside a directory hostd keeps for itself ('.vms')"],
        [path.join(pool, '.hostd-sandboxes'), "is inside a directory hostd keeps for itself ('.hostd-sandboxes')"],
        [path.join(pool, `.hostd-lxc/containers/${victim}/rootfs`), "is inside a directory hostd keeps for itself ('.hostd-lxc')"],
        ['/etc', 'is neither a managed folder nor inside one, nor inside a configured root'],
        ['/', "is or holds hostd's data directory"],
        [outside, 'is neither a managed folder nor inside one, nor inside a configured root'],
        [path.join(share.path, 'link-out'), 'is neither a managed folder nor inside one, nor inside a configured root'],
        [path.join(share.path, 'link-apps'), "is inside a directory hostd keeps for itself ('.hostd-apps')"],
        [`${share.path}/../.hostd-apps`, "is inside a directory hostd keeps for itself ('.hostd-apps')"],
        [`${share.path}/../../../etc`, 'is neither a managed folder nor inside one, nor inside a configured root'],
        [env.d.dataDir, "is or holds hostd's data directory"],
        [path.join(env.d.dataDir, 'db'), "is inside hostd's data directory"],
        // The LXC path is the data dir's `lxc` here; it is refused on its own too (it may be set elsewhere).
        [path.join(env.d.dataDir, 'lxc'), "is or holds hostd's LXC path (lxc.lxc_path)"],
        [path.join(env.d.dataDir, 'lxc', `svc-lxc-${victim}`), "is inside hostd's data directory"],
      ];
      for (const [host_path, why] of cases) {
        const r = await as(tok.both)('POST', '/lxc', {
          name: 'mounter',
          template: 'bb',
          mount_points: [{ host_path, container_path: '/mnt/x', read_only: true }],
        });
        expectError(r, 400, `argument 'mount_points[0].host_path' ${why}: ${MOUNT_RULE}`, host_path);
      }
    } finally {
      fs.rmSync(path.join(share.path, 'link-out'));
      fs.rmSync(path.join(share.path, 'link-apps'));
    }
    expect((await as(tok.read)('GET', '/lxc')).body.containers).to.have.length(1);
  });

  it('newline injection into names, environment, bridges, addresses and paths is 400; no config carries it', async () => {
    const inject = `lxc.mount.entry = / mnt/host none bind 0 0 # ${crypto.randomBytes(4).toString('hex')}`;
    const nl = `\n${inject}`;
    // The registry's shared rules (one message per rule, whatever breaks it).
    const NAME_RULE =
      "must be a name of 1-128 characters without control characters, '/' or '\\', with no space at either end, not '.' or '..', not starting with 'svc-lxc-'";
    const BRIDGE_RULE = "argument 'network_bridge' must be an interface name (1-15 of [A-Za-z0-9_.-], not '.' or '..'), or empty";
    const create: Array<[Record<string, unknown>, string]> = [
      [{ name: `a${nl}` }, `argument 'name' ${NAME_RULE}`],
      [{ name: 'e', environment: { A: `x${nl}` } }, "argument 'environment' has a value with a newline or NUL byte"],
      [{ name: 'e', environment: { [`A${nl}`]: 'x' } }, "argument 'environment' has a variable name that is not [A-Za-z_][A-Za-z0-9_]*"],
      [{ name: 'b', network_bridge: `br0${nl}` }, "argument 'network_bridge' must be at most 15 characters"],
      [{ name: 'b', network_bridge: 'br\n0' }, BRIDGE_RULE],
      [
        { name: 'i', network_type: 'none', ip_address: `10.0.0.2/24${nl}` },
        "argument 'ip_address' must be an IPv4 or IPv6 address with an optional /prefix (1-32 or 1-128), or empty",
      ],
      [{ name: 'd', dns_servers: [`10.0.0.1${nl}`] }, "argument 'dns_servers[0]' must be an IPv4 or IPv6 address"],
      [
        { name: 'm', mount_points: [{ host_path: share.path, container_path: `/mnt/x${nl}`, read_only: false }] },
        "argument 'mount_points[0].container_path' must be an absolute path inside the container, without control characters, ':', ',' or '..' segments",
      ],
      [
        { name: 'm', mount_points: [{ host_path: `${share.path}${nl}`, container_path: '/mnt/x', read_only: false }] },
        "argument 'mount_points[0].host_path' must be an absolute host path without control characters",
      ],
    ];
    for (const [args, error] of create) expectError(await as(tok.both)('POST', '/lxc', { template: 'bb', ...args }), 400, error, JSON.stringify(args));
    expectError(
      await as(tok.both)('POST', '/lxc', { name: 't', template: `bb${nl}` }),
      400,
      "argument 'template' must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit, without '..'",
    );
    const patch: Array<[Record<string, unknown>, string]> = [
      [{ new_name: `v${nl}` }, `argument 'new_name' ${NAME_RULE}, or null`],
      [{ network_bridge: `br0${nl}` }, "argument 'network_bridge' must be at most 15 characters"],
      [{ network_bridge: 'br\n0' }, BRIDGE_RULE],
      [{ dns_servers: [`1.1.1.1${nl}`] }, "argument 'dns_servers[0]' must be an IPv4 or IPv6 address"],
    ];
    for (const [args, error] of patch) expectError(await as(tok.both)('PATCH', `/lxc/${victim}`, args), 400, error, JSON.stringify(args));
    expect(configsText()).to.not.contain(inject);
  });

  it('a folder swapped for a symlink after create: start is 409 naming the rule and the mount, nothing is mounted', async () => {
    const f = await env.folder('swap');
    const c = await as(tok.both)('POST', '/lxc', {
      name: 'swapper',
      template: 'bb',
      mount_points: [{ host_path: f.path, container_path: '/mnt/swap', read_only: true }],
    });
    expect(c.status, JSON.stringify(c.body)).to.equal(201);
    const id = c.body.container.lxcid;
    fs.renameSync(f.path, `${f.path}.away`);
    fs.symlinkSync(outside, f.path);
    try {
      expectError(
        await as(tok.both)('POST', `/lxc/${id}/start`),
        409,
        `container ${id} cannot start: mount point /mnt/swap: its host path ${f.path} now resolves elsewhere (a component was replaced by a symlink): ${MOUNT_RULE}`,
      );
      expect((await as(tok.read)('GET', `/lxc/${id}`)).body.container.state).to.equal('stopped');
      expectError(
        await as(tok.both)('POST', `/lxc/${id}/restart`),
        409,
        `container ${id} cannot restart: mount point /mnt/swap: its host path ${f.path} now resolves elsewhere (a component was replaced by a symlink): ${MOUNT_RULE}`,
      );
      const hs = (await as(tok.read)('GET', '/lxc/host-status')).body;
      expect(hs.violations).to.deep.include({
        lxcid: id,
        name: 'swapper',
        rule: 'mount_points',
        container_path: '/mnt/swap',
        message: `mount point /mnt/swap: its host path ${f.path} now resolves elsewhere (a component was replaced by a symlink): ${MOUNT_RULE}`,
      });
    } finally {
      fs.rmSync(f.path);
      fs.renameSync(`${f.path}.away`, f.path);
    }
    expect((await as(tok.both)('DELETE', `/lxc/${id}`)).status).to.equal(200);
  });

  const coreAttack = (marker: string) =>
    [
      // The attack: a fresh proc (its /proc/sys not covered read-only), then the host's core_pattern.
      `mkdir -p /tmp/p; mount -t proc proc /tmp/p; echo "mount=$?"`,
      `echo "|/tmp/evil-${marker}" > /tmp/p/sys/kernel/core_pattern; echo "fresh=$?"`,
      `echo "|/tmp/evil-${marker}" > /proc/sys/kernel/core_pattern; echo "own=$?"`,
      // The same from a new pid namespace (what nesting is for).
      `unshare -p -f -m --mount-proc=/tmp/p sh -c 'echo "|/tmp/evil-${marker}" > /tmp/p/sys/kernel/core_pattern'; echo "pidns=$?"`,
      'cat /proc/sys/kernel/core_pattern',
    ].join('; ');

  it('the core_pattern attack from exec fails inside an unprivileged container, with nesting off and on', async () => {
    const n = await as(tok.both)('POST', '/lxc', { name: 'nested', template: 'bb', nesting: true });
    expect(n.status, JSON.stringify(n.body)).to.equal(201);
    const nested = n.body.container.lxcid;
    expect((await as(tok.both)('POST', `/lxc/${nested}/start`)).status).to.equal(200);
    const own: Record<number, string> = {};
    for (const id of [victim, nested]) {
      const marker = `esc${crypto.randomBytes(6).toString('hex')}`;
      const r = await execAs(tok.both, id, coreAttack(marker));
      // The attack gets as far as in the issue (a fresh proc is mounted, with nesting or without), and the
      // write fails there: the sysctl belongs to the host's root, and the container's root is uid 100000.
      expect(r.stdout, r.stderr).to.match(/^mount=0$/m);
      expect(r.stderr).to.contain("can't create /tmp/p/sys/kernel/core_pattern: Permission denied");
      for (const step of ['fresh', 'own', 'pidns']) expect(r.stdout, `${id} ${step}: ${r.stdout} ${r.stderr}`).to.match(new RegExp(`^${step}=[1-9]`, 'm'));
      expect(r.stdout).to.not.contain(`evil-${marker}`);
      guard.assertNoRootProcess(marker);
      own[id] = /can't create \/proc\/sys\/kernel\/core_pattern: (.*)$/m.exec(r.stderr)?.[1] ?? '';
    }
    // What nesting changes: the container's own /proc/sys is writable (not read-only); the host's sysctls stay the host root's.
    expect(own).to.deep.equal({ [victim]: 'Read-only file system', [nested]: 'Permission denied' });
    expect((await as(tok.both)('POST', `/lxc/${nested}/stop`)).status).to.equal(200);
    expect((await as(tok.both)('DELETE', `/lxc/${nested}`)).status).to.equal(200);
  });

  it('the cgroup release_agent attack fails inside, from the container and from a user namespace in it', async () => {
    const marker = `esc${crypto.randomBytes(6).toString('hex')}`;
    // Only a mounted hierarchy has a release_agent: without the mount there is nothing to write (and a write would make a plain file).
    const attempt = (dir: string, tag: string) =>
      `mkdir -p ${dir}; if mount -t cgroup -o rdma cgroup ${dir} 2>/dev/null || mount -t cgroup -o memory cgroup ${dir} 2>/dev/null; then echo "/tmp/evil-${marker}" > ${dir}/release_agent; echo "${tag}=$?"; else echo "${tag}=mount-refused"; fi`;
    const r = await execAs(tok.both, victim, [attempt('/tmp/cg', 'direct'), `unshare -U -r -m sh -c '${attempt('/tmp/cg2', 'userns')}'`].join('; '));
    expect(r.stdout, r.stdout + r.stderr).to.match(/^direct=([1-9]|mount-refused)/m);
    expect(r.stdout, r.stdout + r.stderr).to.match(/^userns=([1-9]|mount-refused)/m);
    guard.assertNoRootProcess(marker);
  });

  it("exec reads the container's rootfs and its folder, and none of the sentinels", async () => {
    fs.writeFileSync(path.join(share.path, 'shared.txt'), 'in the folder\n');
    const sentinelFiles = guard.sentinels.map((s) => s.file);
    const r = await execAs(
      tok.exec,
      victim,
      [
        'cat /mnt/share/shared.txt',
        ...sentinelFiles.map((f) => `cat ${f} 2>/dev/null`),
        // Whatever the container can see, anywhere.
        "grep -rs -l 'sentinel-' / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null | head -5",
        'ls /proc/1/root/ >/dev/null 2>&1; cat /proc/1/root/etc/hostname',
        'true',
      ].join('; '),
    );
    expect(r.stdout).to.match(/^in the folder\n/);
    guard.assertNotLeaked(r.stdout + r.stderr, 'exec output');
  });
});
