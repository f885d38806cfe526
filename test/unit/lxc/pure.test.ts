/** Pure parts of the LXC domain: settings, argument rules, config rendering, parsers. */
import { expect } from 'chai';
import { parseSettings } from '../../../daemon/lxc/settings.js';
import { getOperation } from '../../../api/registry/index.js';
import { checkGateway, normalContainerPath, withPrefix } from '../../../api/registry/schema.js';
import { validateArgs } from '../../../api/validate.js';
import { checkEnvironment } from '../../../daemon/lxc/create.js';
import { hostnameOf, imageIdFromName, randomHwaddr } from '../../../daemon/lxc/naming.js';
import { escapeMountField, renderConfig } from '../../../daemon/lxc/lxc-tools/config.js';
import { catalogEntries, fileUrl, imageIdOf, productPaths, streamArch } from '../../../daemon/lxc/lxc-tools/simplestreams.js';
import { parseCgroupMounts, parseProcCgroup, parseFibTrieLocal, parseIfInet6, parseKeyValues, parseNetDev, missingControllers } from '../../../daemon/lxc/lxc-tools/cgroups.js';
import { compressionOf, mountsBelow, parseDumpe2fs } from '../../../daemon/lxc/lxc-tools/storage.js';
import { idmapStatus, parseSubIds } from '../../../daemon/lxc/lxc-tools/host.js';
import { parseLxcInfo } from '../../../daemon/lxc/lxc-tools/tools.js';
import { hostsFile, interfacesFile, networkdFile, resolvConf } from '../../../daemon/lxc/guest-files.js';
import type { ContainerRecord } from '../../../daemon/lxc/records.js';

const err = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('did not throw');
};

describe('lxc settings', () => {
  const cfg = { dataDir: '/var/lib/hostd', pools: [{ id: 'a', path: '/a' }, { id: 'b', path: '/b' }] };
  it('defaults', () => {
    expect(parseSettings(undefined, cfg)).to.deep.equal({
      lxcPath: '/var/lib/hostd/lxc', imageServer: null, defaultBridge: null, defaultStorage: 'a', imageStorage: 'a', mountRoots: [], allowPrivileged: false,
      firstLxcid: 100, stopTimeoutSeconds: 30, defaultCpuCores: 1, defaultMemoryMb: 512, idmap: null,
    });
  });
  it('reads every key', () => {
    const s = parseSettings({ image_server: 'http://x:1/img', default_bridge: 'br0', default_storage: 'b', image_storage: 'b', mount_roots: ['/srv/m/'], first_lxcid: 200, idmap: { uid_start: 200000, gid_start: 300000 } }, cfg);
    expect(s).to.include({ imageServer: 'http://x:1/img/', defaultBridge: 'br0', defaultStorage: 'b', imageStorage: 'b', firstLxcid: 200 });
    expect(s.mountRoots).to.deep.equal(['/srv/m']);
    expect(s.idmap).to.deep.equal({ uid: 200000, gid: 300000, count: 65536 });
  });
  it('refuses unknown keys, bad pools, / as a mount root and a bad URL', () => {
    expect(err(() => parseSettings({ nope: 1 }, cfg))).to.match(/^config lxc\.nope is not a known key/);
    expect(err(() => parseSettings({ default_storage: 'z' }, cfg))).to.equal('config lxc.default_storage must name a storage pool (a, b)');
    expect(err(() => parseSettings({ mount_roots: ['/'] }, cfg))).to.equal('config lxc.mount_roots must not contain / (that would allow every host path)');
    expect(err(() => parseSettings({ image_server: 'ftp://x' }, cfg))).to.equal('config lxc.image_server must be an http or https URL');
    expect(err(() => parseSettings({ allow_privileged: 'yes' }, cfg))).to.equal('config lxc.allow_privileged must be true or false');
    expect(parseSettings({ allow_privileged: true }, cfg).allowPrivileged).to.equal(true);
  });
  it('refuses a mount root at or above a pool root, in an internal directory, or at, above or inside the data dir or the lxc path, naming the key', () => {
    const c = { dataDir: '/var/lib/hostd', pools: [{ id: 'a', path: '/srv/pool-a' }] };
    for (const bad of ['/srv/pool-a', '/srv', '/srv/pool-a/.hostd-lxc', '/mnt/x/.hostd-apps/y', '/var/lib/hostd', '/var/lib', '/var/lib/hostd/certs', '/opt/lxc/c1']) {
      const msg = err(() => parseSettings({ mount_roots: [bad], lxc_path: '/opt/lxc' }, c));
      expect(msg, bad).to.match(new RegExp(`^config lxc\\.mount_roots entry ${bad.replace(/[.]/g, '\\.')} .+; a mount root may hold only what containers may mount$`));
    }
    // A plain directory in a pool is no pool root: mount points below it are still judged by the rule.
    expect(parseSettings({ mount_roots: ['/srv/media', '/mnt/x', '/srv/pool-a/media'], lxc_path: '/opt/lxc' }, c).mountRoots).to.deep.equal(['/srv/media', '/mnt/x', '/srv/pool-a/media']);
  });
});

describe('lxc argument rules', () => {
  /** The 400 dispatch answers for these arguments of `op` (the registry's schema), or null when they pass. */
  const refusal = (op: string, args: Record<string, unknown>): string | null => {
    try {
      validateArgs(getOperation(op)!, args);
      return null;
    } catch (e) {
      return (e as Error).message;
    }
  };
  const create = (args: Record<string, unknown>) => refusal('lxc_create', { name: 'box', template: 'busybox', ...args });

  it("names: the registry's resource-name rule with LXC's reserved prefix, for name and new_name", () => {
    const rule = "must be a name of 1-128 characters without control characters, '/' or '\\', with no space at either end, not '.' or '..', not starting with 'svc-lxc-'";
    expect(create({ name: 'My Box 1' })).to.equal(null);
    expect(create({ name: 'x'.repeat(128) })).to.equal(null);
    expect(create({ name: 'svc-lx' })).to.equal(null);
    expect(refusal('lxc_update', { id: 1, new_name: null })).to.equal(null);
    expect(refusal('lxc_update', { id: 1, new_name: 'x'.repeat(129) })).to.equal("argument 'new_name' must be at most 128 characters");
    expect(refusal('lxc_update', { id: 1, new_name: 'svc-lxc-1' })).to.equal(`argument 'new_name' ${rule}, or null`);
    expect(create({ name: '' })).to.equal("argument 'name' must not be empty");
    for (const bad of ['a\rb', 'a\tb', 'a\\b', 'a/b', '.', '..', 'Svc-Lxc-x', ' x']) {
      expect(create({ name: bad }), JSON.stringify(bad)).to.equal(`argument 'name' ${rule}`);
    }
  });
  it('addresses: CIDR with default prefixes, gateway in the subnet', () => {
    expect(create({ ip_address: '10.0.0.5/16', gateway: '10.0.1.1' })).to.equal(null);
    expect(create({ ip_address: '', gateway: '' })).to.equal(null);
    expect(create({ ip_address: '10.0.0.5/33' })).to.match(/^argument 'ip_address' must be/);
    expect(create({ ip_address: ' 10.0.0.5' })).to.match(/^argument 'ip_address' must be/);
    expect(create({ gateway: '10.0.0.01' })).to.match(/^argument 'gateway' must be/);
    expect(withPrefix('10.0.0.5')).to.equal('10.0.0.5/24');
    expect(withPrefix('10.0.0.5/16')).to.equal('10.0.0.5/16');
    expect(withPrefix('fd00::5')).to.equal('fd00::5/64');
    expect(checkGateway('10.0.1.1', '10.0.0.5/16')).to.equal('10.0.1.1');
    expect(err(() => checkGateway('10.1.0.1', '10.0.0.5/16'))).to.equal("argument 'gateway' is outside 10.0.0.5/16");
    expect(err(() => checkGateway('fd00::1', '10.0.0.5/16'))).to.equal("argument 'gateway' is an IPv6 address and the address is IPv4");
    expect(err(() => checkGateway('fd01::1', 'fd00::5/64'))).to.equal("argument 'gateway' is outside fd00::5/64 (and not link-local)");
  });
  it('environment, image ids, container paths, disk sizes, MACs', () => {
    expect(checkEnvironment({ A_1: 'x y' })).to.deep.equal({ A_1: 'x y' });
    expect(err(() => checkEnvironment({ A: 'x\ny' }))).to.equal("argument 'environment' has a value with a newline or NUL byte");
    expect(err(() => checkEnvironment({ 'A-B': 'x' }))).to.equal("argument 'environment' has a variable name that is not [A-Za-z_][A-Za-z0-9_]*");
    expect(create({ template: 'debian-12_x.1' })).to.equal(null);
    for (const bad of ['../x', 'a..b', '-x']) {
      expect(create({ template: bad }), bad).to.match(/^argument 'template' must be 1-64 of/);
      expect(refusal('lxc_template_create', { id: 1, image_id: bad }), bad).to.match(/^argument 'image_id' must be 1-64 of/);
    }
    expect(create({ template: 'x'.repeat(65) })).to.equal("argument 'template' must be at most 64 characters");
    expect(imageIdFromName('My Web/Box!', 7)).to.equal('My-Web-Box');
    expect(imageIdFromName('!!!', 7)).to.equal('lxc-7');
    expect(imageIdFromName('a..b', 7)).to.equal('a.b');
    const mount = (container_path: string) => create({ mount_points: [{ host_path: '/srv/x', container_path, read_only: false }] });
    expect(mount('/mnt//data/./x/')).to.equal(null);
    expect(normalContainerPath('/mnt//data/./x/', 'c')).to.equal('/mnt/data/x');
    expect(mount('/mnt/../etc')).to.match(/^argument 'mount_points\/0\/container_path' must be|^argument 'mount_points\[0\]\.container_path' must be/);
    expect(mount('mnt')).to.not.equal(null);
    expect(mount('/a:b')).to.not.equal(null);
    expect(err(() => normalContainerPath('/', 'c'))).to.equal("argument 'c' must not be the container's root");
    expect(create({ disk_size_bytes: 0 })).to.equal(null);
    expect(create({ disk_size_bytes: 32 * 1024 * 1024 })).to.equal(null);
    expect(create({ disk_size_bytes: 1024 })).to.match(/^argument 'disk_size_bytes' must be 0 or at least 33554432/);
    expect(randomHwaddr(Buffer.from([1, 0xab, 255]))).to.equal('00:16:3e:01:ab:ff');
  });
});

describe('lxc config rendering', () => {
  const rec: ContainerRecord = {
    lxcid: 101, name: 'Web One', template: 'bb', template_storage_id: 'a', storage_id: 'a', rootfs_kind: 'loop', cpu_cores: 2, memory_mb: 256,
    disk_size_bytes: 1 << 30, privileged: false, idmap: { uid: 100000, gid: 200000, count: 65536 }, nesting: false, environment: { A: 'b c' },
    network: { type: 'bridged', bridge: null, ip_address: '10.0.0.5/24', gateway: '10.0.0.1', dns_servers: [], hwaddr: '00:16:3e:00:00:01' },
    autostart: true, mount_points: [{ host_path: '/a/My Files', container_path: '/mnt/files', read_only: true }], linked_clone: false,
    rootfs_sync_pending: false, created_at: '', updated_at: '',
  };
  const input = { rec, lxcName: 'svc-lxc-101', rootfs: 'loop:/a/.hostd-lxc/containers/101/disk.img', bridge: 'br0', logFile: '/l/lxc.log', cgroupDirs: { container: 'hostd-x/ct-101', monitor: 'hostd-x/mon-101' }, host: { cgroupKeys: 'v1' as const, apparmor: false }, mountIsDir: () => true, mountSource: (i: number) => `/l/svc-lxc-101/mounts/${i}` };

  it('an unprivileged container: id map, capability drops, v1 limits, veth with a static address, mounts, autostart', () => {
    const text = renderConfig(input);
    const lines = text.trim().split('\n').slice(1);
    expect(lines).to.deep.equal([
      'lxc.include = /usr/share/lxc/config/common.conf',
      'lxc.uts.name = web-one',
      'lxc.rootfs.path = loop:/a/.hostd-lxc/containers/101/disk.img',
      'lxc.log.file = /l/lxc.log',
      'lxc.log.level = WARN',
      'lxc.cgroup.dir.container = hostd-x/ct-101',
      'lxc.cgroup.dir.monitor = hostd-x/mon-101',
      'lxc.apparmor.profile = unconfined',
      'lxc.idmap = u 0 100000 65536',
      'lxc.idmap = g 0 200000 65536',
      'lxc.tty.dir = ',
      'lxc.cap.drop = mac_admin mac_override sys_time sys_module sys_rawio',
      'lxc.cgroup.cpu.cfs_period_us = 100000',
      'lxc.cgroup.cpu.cfs_quota_us = 200000',
      'lxc.cgroup.memory.limit_in_bytes = 268435456',
      'lxc.net.0.type = veth',
      'lxc.net.0.link = br0',
      'lxc.net.0.flags = up',
      'lxc.net.0.name = eth0',
      'lxc.net.0.hwaddr = 00:16:3e:00:00:01',
      'lxc.net.0.ipv4.address = 10.0.0.5/24',
      'lxc.net.0.ipv4.gateway = 10.0.0.1',
      'lxc.environment = A=b c',
      'lxc.mount.entry = /l/svc-lxc-101/mounts/0 mnt/files none bind,create=dir,ro 0 0',
      'lxc.start.auto = 1',
    ]);
  });
  it('privileged, nesting, v2 keys, AppArmor, no network', () => {
    const text = renderConfig({ ...input, rec: { ...rec, privileged: true, idmap: null, nesting: true, network: { ...rec.network, type: 'none' } }, host: { cgroupKeys: 'v2', apparmor: true } });
    expect(text).to.not.contain('lxc.idmap');
    expect(text).to.contain('lxc.apparmor.profile = generated\nlxc.apparmor.allow_nesting = 1\n');
    expect(text).to.contain('lxc.mount.auto = proc:rw sys:rw cgroup:rw\n');
    expect(text).to.contain('lxc.cgroup2.cpu.max = 200000 100000\nlxc.cgroup2.memory.max = 268435456\n');
    expect(text).to.contain('lxc.net.0.type = empty\n');
  });
  it('nesting in an unprivileged container keeps the id map and the capability drops; no AppArmor here means unconfined', () => {
    const text = renderConfig({ ...input, rec: { ...rec, nesting: true } });
    expect(text).to.contain('lxc.idmap = u 0 100000 65536\nlxc.idmap = g 0 200000 65536\n');
    expect(text).to.contain('lxc.cap.drop = mac_admin mac_override sys_time sys_module sys_rawio\n');
    expect(text).to.contain('lxc.mount.auto = \nlxc.mount.auto = proc:rw sys:rw cgroup:rw\n');
    // Nothing that would give back what the id map takes away.
    for (const k of ['lxc.cap.keep', 'lxc.seccomp.profile', 'cgroup-full', 'lxc.apparmor.allow_incomplete', 'lxc.mount.entry = /proc', 'lxc.mount.entry = /sys']) expect(text).to.not.contain(k);
  });
  it('refuses to render a value with a line break (it would add a key)', () => {
    for (const r of [
      { ...rec, environment: { A: 'x\nlxc.cap.keep = sys_admin' } },
      { ...rec, mount_points: [{ host_path: '/a', container_path: '/mnt/x\nlxc.idmap =', read_only: true }] },
      { ...rec, network: { ...rec.network, ip_address: '10.0.0.5/24\r' } },
    ]) {
      expect(() => renderConfig({ ...input, rec: r })).to.throw(/^container 101: the value of lxc\.[a-z0-9.]+ holds a line break or NUL; the config is not written$/);
    }
  });
  it('hostnames and mount escapes', () => {
    expect(hostnameOf('Web  One!', 1)).to.equal('web-one');
    expect(hostnameOf('日本', 5)).to.equal('ct5');
    expect(escapeMountField('a b\\c\td')).to.equal('a\\040b\\134c\\011d');
    const spaced = renderConfig({ ...input, rec: { ...rec, mount_points: [{ host_path: '/a', container_path: '/mnt/My Files', read_only: false }] } });
    expect(spaced).to.contain('lxc.mount.entry = /l/svc-lxc-101/mounts/0 mnt/My\\040Files none bind,create=dir 0 0\n');
  });
});

describe('lxc guest files', () => {
  const net = { type: 'bridged' as const, bridge: null, ip_address: '10.0.0.5/20', gateway: '10.0.0.1', dns_servers: ['1.1.1.1'], hwaddr: 'x' };
  it('ifupdown, networkd, resolv.conf, hosts', () => {
    expect(interfacesFile(net)).to.contain('iface eth0 inet static\n    address 10.0.0.5\n    netmask 255.255.240.0\n    gateway 10.0.0.1\n');
    expect(interfacesFile({ ...net, ip_address: null })).to.contain('iface eth0 inet dhcp\n');
    expect(interfacesFile({ ...net, type: 'none' })).to.not.contain('eth0');
    expect(networkdFile(net)).to.contain('[Network]\nAddress=10.0.0.5/20\nGateway=10.0.0.1\nDNS=1.1.1.1\n');
    expect(networkdFile({ ...net, type: 'none' })).to.equal(null);
    expect(resolvConf(net)).to.match(/nameserver 1\.1\.1\.1\n$/);
    expect(resolvConf({ ...net, dns_servers: [] })).to.equal(null);
    expect(hostsFile('127.0.0.1\tlocalhost\n127.0.1.1\told\n', 'new')).to.equal('127.0.0.1\tlocalhost\n127.0.1.1\tnew\n');
  });
});

describe('lxc simplestreams', () => {
  const sha = 'a'.repeat(64);
  it('reads the index and picks the newest rootfs tarball of this arch', () => {
    expect(productPaths({ format: 'index:1.0', index: { images: { datatype: 'image-downloads', format: 'products:1.0', path: 'streams/v1/images.json' }, other: { datatype: 'image-ids', path: 'x' } } })).to.deep.equal(['streams/v1/images.json']);
    const entries = catalogEntries({
      products: {
        'debian:12:amd64:default': { arch: 'amd64', os: 'Debian', release: '12', variant: 'default', aliases: 'debian/12, debian', versions: {
          '20240101_00:00': { items: { 'root.tar.xz': { ftype: 'root.tar.xz', path: 'old', sha256: sha, size: 1 } } },
          '20240201_00:00': { items: { 'rootfs.squashfs': { ftype: 'squashfs', path: 'sq', sha256: sha, size: 2 }, 'root.tar.xz': { ftype: 'root.tar.xz', path: 'new', sha256: sha.toUpperCase(), size: 3 } } },
          '20240301_00:00': { items: { 'lxd.tar.xz': { ftype: 'lxd.tar.xz', path: 'meta', sha256: sha, size: 4 } } },
        } },
        'debian:12:arm64:default': { arch: 'arm64', versions: { '1': { items: { 'root.tar.xz': { ftype: 'root.tar.xz', path: 'p', sha256: sha, size: 1 } } } } },
      },
    }, 'amd64');
    expect(entries).to.have.length(1);
    expect(entries[0]).to.deep.include({ image_id: 'debian-12-amd64-default', version: '20240201_00:00', size_bytes: 3, sha256: sha, aliases: ['debian/12', 'debian'] });
    expect(entries[0].file.path).to.equal('new');
  });
  it('ids, arch names, and file URLs that cannot leave the server', () => {
    expect(imageIdOf('ubuntu:24.04:amd64:cloud')).to.equal('ubuntu-24.04-amd64-cloud');
    expect(streamArch('x64')).to.equal('amd64');
    expect(fileUrl('http://h:1/base/', 'images/a.tar.xz')).to.equal('http://h:1/base/images/a.tar.xz');
    for (const bad of ['../x', '/etc/passwd', 'http://evil/x', 'a/../../x']) expect(() => fileUrl('http://h/', bad), bad).to.throw(/outside the server/);
  });
});

describe('lxc cgroup and proc parsers', () => {
  it('recognises hybrid, v1 and v2 layouts', () => {
    const hybrid = 'cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /sys/fs/cgroup/systemd cgroup rw,name=systemd 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n';
    const h = parseCgroupMounts(hybrid);
    expect(h.version).to.equal('hybrid');
    expect(h.controllers).to.deep.equal(['cpu', 'memory']);
    expect(missingControllers(h)).to.deep.equal(['cpuacct', 'freezer', 'pids']);
    const v2 = parseCgroupMounts('cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n', () => ['cpu', 'memory', 'pids']);
    expect(v2).to.deep.include({ version: 'v2', unified: '/sys/fs/cgroup' });
    expect(missingControllers(v2)).to.deep.equal([]);
    expect(parseCgroupMounts('cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n').v1).to.deep.equal({ cpu: '/sys/fs/cgroup/cpu,cpuacct', cpuacct: '/sys/fs/cgroup/cpu,cpuacct' });
  });
  it("hostd's own cgroups from /proc/self/cgroup", () => {
    expect(parseProcCgroup('12:cpu,cpuacct:/system.slice/hostd.service\n4:memory:/\n0::/system.slice/hostd.service\n')).to.deep.equal({
      cpu: '/system.slice/hostd.service', cpuacct: '/system.slice/hostd.service', memory: '/', '': '/system.slice/hostd.service',
    });
  });
    it('net/dev, fib_trie, if_inet6, key-value files, lxc-info', () => {
    const dev = 'Inter-|   Receive |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0\n  eth0:    2000      20    0    0    0     0          0         0     3000      30    0    0    0     0       0          0\n';
    expect(parseNetDev(dev)).to.deep.equal([{ name: 'eth0', rx_bytes: 2000, rx_packets: 20, tx_bytes: 3000, tx_packets: 30 }]);
    const fib = 'Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 10.77.0.0/24 2 0 2\n        |-- 10.77.0.2\n           /32 host LOCAL\n        |-- 10.77.0.255\n           /32 link BROADCAST\n     |-- 127.0.0.1\n        /32 host LOCAL\n';
    expect(parseFibTrieLocal(fib)).to.deep.equal(['10.77.0.2']);
    expect(parseIfInet6('fd000000000000000000000000000005 02 40 00 80 eth0\nfe800000000000000000000000000001 02 40 20 80 eth0\n00000000000000000000000000000001 01 80 10 80 lo\n')).to.deep.equal(['fd00:0:0:0:0:0:0:5']);
    expect(parseKeyValues('usage_usec 12\nfrozen 1\n')).to.deep.equal({ usage_usec: 12, frozen: 1 });
    expect(parseLxcInfo('State:          RUNNING\nPID:            42\nIP:             10.0.0.2\n')).to.deep.equal({ state: 'RUNNING', pid: 42, ips: ['10.0.0.2'] });
  });
});

describe('lxc storage and host helpers', () => {
  it('tar compression by magic bytes', () => {
    expect(compressionOf(Buffer.from([0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 1]))).to.equal('xz');
    expect(compressionOf(Buffer.from([0x1f, 0x8b, 8]))).to.equal('gzip');
    expect(compressionOf(Buffer.from([0x28, 0xb5, 0x2f, 0xfd]))).to.equal('zstd');
    const tar = Buffer.alloc(512);
    tar.write('ustar', 257, 'latin1');
    expect(compressionOf(tar)).to.equal('none');
    expect(compressionOf(Buffer.from('hello'))).to.equal(null);
  });
  it('dumpe2fs figures and mounts below a dir', () => {
    expect(parseDumpe2fs('Block count:              65536\nFree blocks:              1000\nBlock size:               1024\n')).to.deep.equal({ total_bytes: 65536 * 1024, free_bytes: 1000 * 1024 });
    expect(parseDumpe2fs('nothing')).to.equal(null);
    const mounts = '/dev/loop1 /p/.hostd-lxc/tmp/x/mnt-1 ext4 rw 0 0\n/dev/vda / ext4 rw 0 0\n/dev/loop2 /p/.hostd-lxc/tmp/x/a\\040b ext4 rw 0 0\n';
    expect(mountsBelow(mounts, '/p/.hostd-lxc/tmp/x')).to.deep.equal(['/p/.hostd-lxc/tmp/x/mnt-1', '/p/.hostd-lxc/tmp/x/a b']);
    expect(mountsBelow(mounts, '/p/.hostd-lxc/tmp/xy')).to.deep.equal([]);
  });
  it('id map readiness from /etc/subuid and /etc/subgid', () => {
    expect(parseSubIds('root:100000:65536\nbob:165536:65536\n')).to.deep.equal([{ start: 100000, count: 65536 }]);
    expect(idmapStatus('root:100000:65536\n', 'root:100000:65536\n', null)).to.deep.include({ ready: true, range: { uid: 100000, gid: 100000, count: 65536 } });
    const none = idmapStatus('', '', null);
    expect(none.ready).to.equal(false);
    expect(none.reason).to.contain('usermod --add-subuids 100000-165535 --add-subgids 100000-165535 root');
    expect(idmapStatus('root:100000:65536\n', 'root:100000:65536\n', { uid: 300000, gid: 100000, count: 65536 }).ready).to.equal(false);
  });
});
