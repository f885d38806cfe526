/**
 * LXC containers against the real LXC: create with the spec's arguments,
 * confinement, unprivileged id maps, cgroup limits, the state table, exec,
 * stats, update rules, docs, delete, and system allocation.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { cgroupDir, cleanupLxc, lxcEnv, initPid, requireLxc, type LxcEnv } from '../../helpers/lxc-env.js';
import { eventually } from '../../helpers/daemon.js';
import { EXEC_STREAM_CAP_BYTES } from '../../../daemon/lib/exec-output.js';

/** The registry's rule for container names, as the 400 states it. */
const NAME_RULE =
  "must be a name of 1-128 characters without control characters, '/' or '\\', with no space at either end, not '.' or '..', not starting with 'svc-lxc-'";

describe('lxc runtime: create, lifecycle, exec, stats', function () {
  this.timeout(120_000);
  let env: LxcEnv;
  let id: number;
  let shared: string;

  before(async function () {
    await requireLxc(this);
    env = await lxcEnv();
    // Containers mount managed folders (or lxc.mount_roots), never a bare pool directory.
    shared = (await env.folder('shared')).path;
    // What an operator does for a container's data dir: give it to the container's (mapped) root.
    fs.chownSync(shared, 100000, 100000);
  });
  after(cleanupLxc);

  const ct = (p = '') => `/lxc/${id}${p}`;
  const exec = async (command: string, timeout_seconds?: number) => {
    const r = await env.req('POST', ct('/exec'), { command, ...(timeout_seconds ? { timeout_seconds } : {}) });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body as { exit_code: number | null; stdout: string; stderr: string; timed_out: boolean; truncated: boolean };
  };

  it('reports host status: LXC version, cgroup layout, id map readiness, nothing missing', async () => {
    const r = await env.req('GET', '/lxc/host-status');
    expect(r.status).to.equal(200);
    expect(r.body.name).to.equal('lxc');
    expect(r.body.available).to.equal(true);
    expect(r.body.version).to.match(/^\d+\.\d+/);
    expect(['v1', 'hybrid', 'v2']).to.include(r.body.cgroup.version);
    expect(r.body.idmap.ready).to.equal(true);
    expect(r.body.idmap.range.count).to.equal(65536);
    expect(r.body.missing).to.deep.equal([]);
    expect(r.body.programs.find((p: any) => p.name === 'lxc-start')).to.include({ available: true });
  });

  it('lists the image hostctl imported, with its checksum', async () => {
    const r = await env.req('GET', '/lxc/images');
    expect(r.status).to.equal(200);
    expect(r.body.images).to.have.length(1);
    expect(r.body.images[0]).to.include({
      image_id: 'bb',
      storage_id: 'p1',
      source: 'import',
      sha256: env.image.sha256,
      size_bytes: env.image.size,
      compression: 'xz',
    });
    expect(r.body.images[0].used_by).to.deep.equal([]);
  });

  it('refuses bad arguments with 400 naming them', async () => {
    const base = { template: 'bb' };
    const cases: Array<[Record<string, unknown>, string]> = [
      // One rule for names (the registry's resourceName), one message for every way of breaking it.
      [{ name: 'a/b' }, `argument 'name' ${NAME_RULE}`],
      [{ name: 'a\nb' }, `argument 'name' ${NAME_RULE}`],
      [{ name: '..' }, `argument 'name' ${NAME_RULE}`],
      [{ name: 'svc-lxc-7' }, `argument 'name' ${NAME_RULE}`],
      [{ name: 'x'.repeat(129) }, "argument 'name' must be at most 128 characters"],
      [{ name: 'ok', ip_address: '10.0.0.300' }, "argument 'ip_address' must be an IPv4 or IPv6 address with an optional /prefix (1-32 or 1-128), or empty"],
      [{ name: 'ok', ip_address: '10.0.0.2/24' }, "argument 'ip_address' needs network_type bridged"],
      [{ name: 'ok', environment: { 'BAD-KEY': 'x' } }, "argument 'environment' has a variable name that is not [A-Za-z_][A-Za-z0-9_]*"],
      [{ name: 'ok', disk_size_bytes: 1000 }, "argument 'disk_size_bytes' must be 0 or at least 33554432 (32 MiB)"],
      [
        { name: 'ok', network_type: 'bridged' },
        "argument 'network_type' bridged needs network_bridge (no default bridge is configured: set lxc.default_bridge)",
      ],
      [{ name: 'ok', network_type: 'bridged', network_bridge: 'nosuchbr0' }, "argument 'network_bridge': bridge 'nosuchbr0' does not exist on this host"],
      [
        { name: 'ok', linked_clone: true },
        "argument 'linked_clone' needs a ZFS pool: storage 'p1' is not on ZFS (a linked clone is a ZFS clone of the image's base dataset)",
      ],
    ];
    for (const [args, error] of cases) {
      const r = await env.req('POST', '/lxc', { ...base, ...args });
      expect(r.status, JSON.stringify(args)).to.equal(400);
      expect(r.body, JSON.stringify(args)).to.deep.equal({ error });
    }
  });

  it('confines mount_points.host_path to managed folders: /etc, a symlink out, a pool root, an internal dir and a plain pool dir are 400', async () => {
    const rule = 'containers may mount only managed folders and lxc.mount_roots, never a storage pool root or a directory hostd keeps for itself';
    fs.symlinkSync('/etc', path.join(env.pools.p1, 'etc-link'));
    fs.mkdirSync(path.join(env.pools.p1, 'not-a-folder'));
    const cases: Array<[string, string]> = [
      ['/etc', 'is neither a managed folder nor inside one, nor inside a configured root'],
      // A symlink inside a pool that points out of it is judged by where it leads.
      [path.join(env.pools.p1, 'etc-link'), 'is neither a managed folder nor inside one, nor inside a configured root'],
      [env.pools.p1, 'is a storage pool root or holds one (every domain keeps its files there)'],
      [path.join(env.pools.p1, '.hostd-lxc'), "is inside a directory hostd keeps for itself ('.hostd-lxc')"],
      [path.join(env.pools.p1, 'not-a-folder'), 'is neither a managed folder nor inside one, nor inside a configured root'],
      [env.d.dataDir, "is or holds hostd's data directory"],
    ];
    for (const [host_path, why] of cases) {
      const r = await env.req('POST', '/lxc', { name: 'sneaky', template: 'bb', mount_points: [{ host_path, container_path: '/mnt/x', read_only: true }] });
      expect(r.status, host_path).to.equal(400);
      expect(r.body, host_path).to.deep.equal({ error: `argument 'mount_points[0].host_path' ${why}: ${rule}` });
    }
    fs.rmSync(path.join(env.pools.p1, 'etc-link'));
    fs.rmdirSync(path.join(env.pools.p1, 'not-a-folder'));
    const list = await env.req('GET', '/lxc');
    expect(list.body.containers).to.deep.equal([]);
  });

  it('the catalog is empty, saying why, while no image server is configured; a download is 404', async () => {
    const r = await env.req('GET', '/lxc/images/catalog');
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal({ server: null, images: [], reason: 'no image server is configured (set lxc.image_server to a simplestreams URL)' });
    const d = await env.req('POST', '/lxc/images/debian-12', {});
    expect(d.status).to.equal(404);
    expect(d.body).to.deep.equal({
      error: "image 'debian-12' is not in the catalog: no image server is configured (set lxc.image_server to a simplestreams URL)",
    });
  });

  it('404 for an unknown image, an unknown pool and an unknown container', async () => {
    expect((await env.req('POST', '/lxc', { name: 'x', template: 'nope' })).body).to.deep.equal({ error: "image 'nope' not found (see GET /lxc/images)" });
    const pool = await env.req('POST', '/lxc', { name: 'x', template: 'bb', storage_id: 'nope' });
    expect(pool.status).to.equal(404);
    expect(pool.body).to.deep.equal({ error: "storage 'nope' not found (argument 'storage_id')" });
    const g = await env.req('GET', '/lxc/9999');
    expect(g.status).to.equal(404);
    expect(g.body).to.deep.equal({ error: 'container 9999 not found' });
  });

  it('creates an unprivileged container with every argument, assigning an lxcid', async () => {
    const r = await env.req('POST', '/lxc', {
      name: 'Web One',
      template: 'bb',
      cpu_cores: 1,
      memory_mb: 96,
      environment: { GREETING: 'hello world' },
      autostart: false,
      nesting: false,
      seed_data: 'seed-for-web-one',
      network_type: 'none',
      dns_servers: ['10.9.9.9'],
      mount_points: [{ host_path: shared, container_path: '/mnt/shared', read_only: false }],
    });
    expect(r.status, JSON.stringify(r.body)).to.equal(201);
    const c = r.body.container;
    id = c.lxcid;
    expect(id).to.be.at.least(100);
    expect(c).to.include({
      name: 'Web One',
      state: 'stopped',
      hostname: 'web-one',
      template: 'bb',
      storage_id: 'p1',
      cpu_cores: 1,
      memory_mb: 96,
      disk_size_bytes: 0,
      privileged: false,
      nesting: false,
      autostart: false,
      linked_clone: false,
    });
    expect(c.environment).to.deep.equal({ GREETING: 'hello world' });
    expect(c.idmap).to.deep.equal({ uid: 100000, gid: 100000, count: 65536 });
    expect(c.network).to.include({ type: 'none', ip_address: null });
    expect(c.network.dns_servers).to.deep.equal(['10.9.9.9']);
    expect(c.mount_points).to.deep.equal([{ host_path: fs.realpathSync(shared), container_path: '/mnt/shared', read_only: false }]);
    expect(c.rootfs.kind).to.equal('dir');
    // Files belong to the container's mapped root, not to the host's root.
    const st = fs.statSync(path.join(c.rootfs.path, 'bin/busybox'));
    expect(st.uid).to.equal(100000);
    // The seed is in place before the first boot, readable only by the container's root.
    const seed = fs.statSync(path.join(c.rootfs.path, 'etc/svc/seed'));
    expect(seed.mode & 0o777).to.equal(0o600);
    expect(seed.uid).to.equal(100000);
    expect(fs.readFileSync(path.join(c.rootfs.path, 'etc/svc/seed'), 'utf8')).to.equal('seed-for-web-one');
  });

  it('409 for a taken lxcid and a taken name', async () => {
    const a = await env.req('POST', '/lxc', { name: 'other', template: 'bb', lxcid: id });
    expect(a.status).to.equal(409);
    expect(a.body).to.deep.equal({ error: `lxcid ${id} is taken` });
    const b = await env.req('POST', '/lxc', { name: 'web one', template: 'bb' });
    expect(b.status).to.equal(409);
    expect(b.body).to.deep.equal({ error: `a container named 'web one' exists already (lxcid ${id})` });
  });

  it('start is idempotent and the container runs', async () => {
    for (let i = 0; i < 2; i++) {
      const r = await env.req('POST', ct('/start'));
      expect(r.status).to.equal(200);
      expect(r.body.container.state).to.equal('running');
    }
    expect((await env.req('GET', ct())).body.container.state).to.equal('running');
  });

  it('exec runs /bin/sh -c with exit code, stdout, stderr and the environment', async () => {
    const r = await exec('echo "$GREETING"; cat /etc/hostname; echo oops >&2; exit 7');
    expect(r).to.include({ exit_code: 7, stdout: 'hello world\nweb-one\n', stderr: 'oops\n', timed_out: false });
    expect((await exec('cat /etc/resolv.conf')).stdout).to.contain('nameserver 10.9.9.9');
  });

  it('root in the container is not root on the host (id map)', async () => {
    const inside = await exec('id -u; cat /proc/self/uid_map');
    expect(inside.stdout.split('\n')[0]).to.equal('0');
    expect(inside.stdout).to.match(/^\s*0\s+100000\s+65536\s*$/m);
    const pid = initPid(env.d.dataDir, id);
    const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    expect(/^Uid:\s+(\d+)/m.exec(status)![1]).to.equal('100000');
    // A file the container's root writes on a shared mount is owned by the mapped uid on the host.
    expect((await exec('echo from-container > /mnt/shared/made-inside')).exit_code).to.equal(0);
    const st = fs.statSync(path.join(shared, 'made-inside'));
    expect(st.uid).to.equal(100000);
    // Host files owned by the host's root are nobody's inside: the container's root cannot take them.
    fs.writeFileSync(path.join(shared, 'host-secret'), 'x', { mode: 0o600 });
    const rd = await exec('cat /mnt/shared/host-secret');
    expect(rd.exit_code).to.not.equal(0);
    expect(rd.stderr).to.match(/Permission denied/);
  });

  it('drops capabilities and confines system calls with seccomp', async () => {
    const st = (await exec('grep -E "^(CapBnd|Seccomp):" /proc/self/status')).stdout;
    const bnd = BigInt('0x' + /CapBnd:\s+([0-9a-f]+)/.exec(st)![1]);
    for (const [cap, bit] of [
      ['sys_module', 16n],
      ['sys_rawio', 17n],
      ['sys_time', 25n],
      ['mac_override', 32n],
      ['mac_admin', 33n],
    ] as const) {
      expect((bnd >> bit) & 1n, cap).to.equal(0n);
    }
    expect(/Seccomp:\s+(\d)/.exec(st)![1]).to.equal('2');
  });

  it('applies CPU and memory limits through cgroups', async () => {
    const mem = fs.readFileSync(path.join(cgroupDir(env.d.dataDir, id, 'memory'), 'memory.limit_in_bytes'), 'utf8').trim();
    expect(Number(mem)).to.equal(96 * 1024 * 1024);
    const quota = fs.readFileSync(path.join(cgroupDir(env.d.dataDir, id, 'cpu'), 'cpu.cfs_quota_us'), 'utf8').trim();
    expect(Number(quota)).to.equal(100_000);
  });

  it('freeze pauses every process; exec is 409 while frozen; unfreeze resumes; unfreeze again is 409', async () => {
    // The loop appends forever: the file's size only grows while its process runs.
    await exec('(while :; do echo x >> /tmp/counter; done) >/dev/null 2>&1 & echo $! > /tmp/counter.pid');
    const file = path.join(env.pools.p1, '.hostd-lxc/containers', String(id), 'rootfs/tmp/counter');
    const read = async () => (fs.existsSync(file) ? fs.statSync(file).size : 0);
    await eventually(async () => (await read()) > 20, 10_000, 'the counter to run');
    const f = await env.req('POST', ct('/freeze'));
    expect(f.status).to.equal(200);
    expect(f.body.container.state).to.equal('frozen');
    expect(fs.readFileSync(path.join(cgroupDir(env.d.dataDir, id, 'freezer'), 'freezer.state'), 'utf8').trim()).to.equal('FROZEN');
    const a = await read();
    await new Promise((r) => setTimeout(r, 400));
    const b = await read();
    expect(b).to.equal(a);
    const again = await env.req('POST', ct('/freeze'));
    expect(again.status).to.equal(200);
    const ex = await env.req('POST', ct('/exec'), { command: 'true' });
    expect(ex.status).to.equal(409);
    expect(ex.body).to.deep.equal({ error: `container ${id} is frozen; unfreeze it first` });
    const u = await env.req('POST', ct('/unfreeze'));
    expect(u.status).to.equal(200);
    expect(u.body.container.state).to.equal('running');
    await eventually(async () => (await read()) > b, 10_000, 'the counter to move again');
    const u2 = await env.req('POST', ct('/unfreeze'));
    expect(u2.status).to.equal(409);
    expect(u2.body).to.deep.equal({ error: `container ${id} is not frozen (it is running)` });
    await exec('kill $(cat /tmp/counter.pid)');
  });

  it('exec honours timeout_seconds: the command and what it started are killed at the deadline', async () => {
    const t0 = Date.now();
    const r = await exec('sleep 101 & sleep 102; echo never', 1);
    expect(r.timed_out).to.equal(true);
    expect(r.stdout).to.equal('');
    expect(Date.now() - t0).to.be.below(8000);
    const ps = await exec('ps | grep -c "sleep 10[12]"; true');
    expect(ps.stdout.trim()).to.equal('0');
  });

  it('exec output is capped at 1 MiB per stream, says it was cut, and the daemon does not grow while it floods', async function () {
    // Hundreds of MB through a pipe on a shared, loaded machine: a bound on waiting, not a measure.
    this.timeout(600_000);
    const status = `/proc/${env.d.proc.pid}/status`;
    const kb = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(status, 'utf8'))![1]) * 1024;
    // 400 MB on stdout and 3 MB on stderr: both streams are read to their end and cut at the cap.
    const flood = 'yes | head -c 400000000; yes e | head -c 3000000 >&2; echo done >&2';
    const first = await exec(flood, 300);
    expect(first).to.include({ exit_code: 0, timed_out: false, truncated: true });
    expect(Buffer.byteLength(first.stdout)).to.equal(EXEC_STREAM_CAP_BYTES);
    expect(first.stdout).to.equal('y\n'.repeat(EXEC_STREAM_CAP_BYTES / 2));
    expect(Buffer.byteLength(first.stderr)).to.equal(EXEC_STREAM_CAP_BYTES);
    // The first flood settles the garbage collector's and the allocator's working set (a few tens of MB,
    // whatever the output's size); the second is measured from there, by the peak (VmHWM, reset first).
    fs.writeFileSync(`/proc/${env.d.proc.pid}/clear_refs`, '5');
    const before = kb('VmRSS');
    // A daemon that kept the output would peak at least 100 MB higher.
    const second = await exec('yes | head -c 100000000', 300);
    const peak = kb('VmHWM');
    expect(second).to.include({ exit_code: 0, truncated: true, stderr: '' });
    expect(Buffer.byteLength(second.stdout)).to.equal(EXEC_STREAM_CAP_BYTES);
    expect(peak - before).to.be.below(EXEC_STREAM_CAP_BYTES * 20);
    const small = await exec('echo short');
    expect(small).to.include({ stdout: 'short\n', truncated: false });
  });

  it('exec honours timeout_seconds while the command floods its output', async () => {
    const r = await exec('yes', 2);
    expect(r).to.include({ timed_out: true, truncated: true, exit_code: null });
    expect(Buffer.byteLength(r.stdout)).to.equal(EXEC_STREAM_CAP_BYTES);
    const ps = await exec('ps | grep -c "[y]es"; true');
    expect(ps.stdout.trim()).to.equal('0');
  });

  it('stats reads CPU, memory, disk and network figures', async () => {
    await exec('i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done');
    const r = await env.req('GET', ct('/stats'));
    expect(r.status).to.equal(200);
    const s = r.body.stats;
    expect(s.state).to.equal('running');
    expect(s.cpu.usage_seconds).to.be.above(0);
    expect(s.cpu.cores_limit).to.equal(1);
    expect(s.memory.used_bytes).to.be.above(0);
    expect(s.memory.limit_bytes).to.equal(96 * 1024 * 1024);
    expect(s.disk.used_bytes).to.be.above(500_000);
    expect(s.disk.limit_bytes).to.equal(null);
    expect(s.network.interfaces).to.deep.equal([]);
    expect(s.pids).to.be.at.least(1);
  });

  it('system allocation counts the container', async () => {
    const r = await env.req('GET', '/system/allocation');
    expect(r.status).to.equal(200);
    expect(r.body.allocated.containers).to.deep.equal({ count: 1, running: 1 });
    expect(r.body.allocated.cpu_cores).to.equal(1);
    expect(r.body.allocated.memory_mb).to.equal(96);
  });

  it('PATCH: new_name rules, live CPU and memory, network needs a restart', async () => {
    // One rule for names (the registry's resourceName), one message for every way of breaking it.
    for (const [new_name, error] of [
      ['a/b', `argument 'new_name' ${NAME_RULE}, or null`],
      ['x\u0000', `argument 'new_name' ${NAME_RULE}, or null`],
      ['SVC-LXC-1', `argument 'new_name' ${NAME_RULE}, or null`],
    ]) {
      const r = await env.req('PATCH', ct(), { new_name });
      expect(r.status, new_name).to.equal(400);
      expect(r.body).to.deep.equal({ error });
    }
    const long = await env.req('PATCH', ct(), { new_name: 'y'.repeat(129) });
    expect(long.status).to.equal(400);
    const r = await env.req('PATCH', ct(), { new_name: 'Web Prime', cpu_cores: 2, memory_mb: 128 });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    expect(r.body.container).to.include({ name: 'Web Prime', cpu_cores: 2, memory_mb: 128, hostname: 'web-prime' });
    expect(r.body.restart_required).to.equal(true);
    expect(Number(fs.readFileSync(path.join(cgroupDir(env.d.dataDir, id, 'memory'), 'memory.limit_in_bytes'), 'utf8'))).to.equal(128 * 1024 * 1024);
    expect(Number(fs.readFileSync(path.join(cgroupDir(env.d.dataDir, id, 'cpu'), 'cpu.cfs_quota_us'), 'utf8'))).to.equal(200_000);
    const keep = await env.req('PATCH', ct(), { cpu_cores: 0, memory_mb: 0, new_name: null });
    expect(keep.body.container).to.include({ name: 'Web Prime', cpu_cores: 2, memory_mb: 128 });
    expect(keep.body.restart_required).to.equal(false);
  });

  it('docs: set, append, get', async () => {
    expect((await env.req('GET', ct('/docs'))).body).to.deep.equal({ lxcid: id, content: '', updated_at: null });
    const s = await env.req('PUT', ct('/docs'), { content: '# Web\n' });
    expect(s.status).to.equal(200);
    expect(s.body.content).to.equal('# Web\n');
    const a = await env.req('PUT', ct('/docs'), { content: 'restarted', append_entry: true });
    expect(a.body.content).to.match(/^# Web\n\n## \d{4}-\d\d-\d\dT[\d:.]+Z\n\nrestarted\n$/);
    expect((await env.req('GET', ct('/docs'))).body.content).to.equal(a.body.content);
  });

  it('restart applies the pending name; stop is idempotent; delete needs it stopped', async () => {
    const r = await env.req('POST', ct('/restart'));
    expect(r.status).to.equal(200);
    expect(r.body.container.state).to.equal('running');
    expect((await exec('hostname')).stdout).to.equal('web-prime\n');
    const del = await env.req('DELETE', ct());
    expect(del.status).to.equal(409);
    expect(del.body).to.deep.equal({ error: `container ${id} is running; stop it first` });
    for (let i = 0; i < 2; i++) {
      const s = await env.req('POST', ct('/stop'));
      expect(s.status).to.equal(200);
      expect(s.body.container.state).to.equal('stopped');
    }
    const ex = await env.req('POST', ct('/exec'), { command: 'true' });
    expect(ex.status).to.equal(409);
    expect(ex.body).to.deep.equal({ error: `container ${id} is not running (it is stopped)` });
  });

  it('a privileged container is refused (403) while lxc.allow_privileged is off, the default', async () => {
    const r = await env.req('POST', '/lxc', { name: 'priv', template: 'bb', privileged: true });
    expect(r.status).to.equal(403);
    expect(r.body).to.deep.equal({
      error:
        "argument 'privileged': privileged containers are turned off on this host (lxc.allow_privileged is false); a privileged container is root on the host",
    });
    expect((await env.req('GET', '/lxc')).body.containers.map((c: any) => c.name)).to.not.include('priv');
  });

  it('nesting: the container gets writable proc and sys and uncovered copies for nested containers; PATCH turns it off', async () => {
    const r = await env.req('POST', '/lxc', { name: 'nest', template: 'bb', nesting: true });
    expect(r.status).to.equal(201);
    const nid = r.body.container.lxcid;
    expect(r.body.container.nesting).to.equal(true);
    expect((await env.req('POST', `/lxc/${nid}/start`)).status).to.equal(200);
    const m = await env.req('POST', `/lxc/${nid}/exec`, { command: 'grep -E " /dev/.lxc/(proc|sys) " /proc/mounts | cut -d" " -f2 | sort | tr "\\n" " "' });
    expect(m.body.stdout).to.equal('/dev/.lxc/proc /dev/.lxc/sys ');
    const off = await env.req('PATCH', `/lxc/${nid}`, { nesting: false });
    expect(off.body).to.deep.include({ restart_required: true });
    expect((await env.req('POST', `/lxc/${nid}/restart`)).status).to.equal(200);
    const m2 = await env.req('POST', `/lxc/${nid}/exec`, { command: 'grep -c " /dev/.lxc/proc " /proc/mounts; true' });
    expect(m2.body.stdout).to.equal('0\n');
    expect((await env.req('POST', `/lxc/${nid}/stop`)).status).to.equal(200);
    expect((await env.req('DELETE', `/lxc/${nid}`)).status).to.equal(200);
  });

  it('delete removes the record, the rootfs and the LXC config', async () => {
    const dir = path.join(env.pools.p1, '.hostd-lxc/containers', String(id));
    expect(fs.existsSync(dir)).to.equal(true);
    const r = await env.req('DELETE', ct());
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal({ deleted: true, lxcid: id, name: 'Web Prime' });
    expect(fs.existsSync(dir)).to.equal(false);
    expect(fs.existsSync(path.join(env.d.dataDir, 'lxc', `svc-lxc-${id}`))).to.equal(false);
    expect((await env.req('GET', ct())).status).to.equal(404);
    expect(fs.readFileSync(path.join(shared, 'made-inside'), 'utf8')).to.equal('from-container\n');
  });
});
