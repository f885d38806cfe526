/**
 * What the LXC driver reads from the host and the image server: simplestreams
 * indexes, cgroup and /proc files, lxc-info, tar magic bytes, dumpe2fs,
 * mounts, and the id map in /etc/subuid and /etc/subgid.
 */
import { expect } from 'chai';
import { catalogEntries, fileUrl, imageIdOf, productPaths, streamArch } from '../../../daemon/lxc/lxc-tools/simplestreams.js';
import {
  parseCgroupMounts,
  parseProcCgroup,
  parseFibTrieLocal,
  parseIfInet6,
  parseKeyValues,
  parseNetDev,
  missingControllers,
} from '../../../daemon/lxc/lxc-tools/cgroups.js';
import { compressionOf, mountsBelow, parseDumpe2fs } from '../../../daemon/lxc/lxc-tools/storage.js';
import { idmapStatus, parseSubIds } from '../../../daemon/lxc/lxc-tools/host.js';
import { parseLxcInfo } from '../../../daemon/lxc/lxc-tools/tools.js';

describe('lxc simplestreams', () => {
  const sha = 'a'.repeat(64);
  it('reads the index and picks the newest rootfs tarball of this arch', () => {
    expect(
      productPaths({
        format: 'index:1.0',
        index: { images: { datatype: 'image-downloads', format: 'products:1.0', path: 'streams/v1/images.json' }, other: { datatype: 'image-ids', path: 'x' } },
      }),
    ).to.deep.equal(['streams/v1/images.json']);
    const entries = catalogEntries(
      {
        products: {
          'debian:12:amd64:default': {
            arch: 'amd64',
            os: 'Debian',
            release: '12',
            variant: 'default',
            aliases: 'debian/12, debian',
            versions: {
              '20240101_00:00': { items: { 'root.tar.xz': { ftype: 'root.tar.xz', path: 'old', sha256: sha, size: 1 } } },
              '20240201_00:00': {
                items: {
                  'rootfs.squashfs': { ftype: 'squashfs', path: 'sq', sha256: sha, size: 2 },
                  'root.tar.xz': { ftype: 'root.tar.xz', path: 'new', sha256: sha.toUpperCase(), size: 3 },
                },
              },
              '20240301_00:00': { items: { 'lxd.tar.xz': { ftype: 'lxd.tar.xz', path: 'meta', sha256: sha, size: 4 } } },
            },
          },
          'debian:12:arm64:default': {
            arch: 'arm64',
            versions: { '1': { items: { 'root.tar.xz': { ftype: 'root.tar.xz', path: 'p', sha256: sha, size: 1 } } } },
          },
        },
      },
      'amd64',
    );
    expect(entries).to.have.length(1);
    expect(entries[0]).to.deep.include({
      image_id: 'debian-12-amd64-default',
      version: '20240201_00:00',
      size_bytes: 3,
      sha256: sha,
      aliases: ['debian/12', 'debian'],
    });
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
    const hybrid =
      'cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\ncgroup /sys/fs/cgroup/systemd cgroup rw,name=systemd 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw 0 0\n';
    const h = parseCgroupMounts(hybrid);
    expect(h.version).to.equal('hybrid');
    expect(h.controllers).to.deep.equal(['cpu', 'memory']);
    expect(missingControllers(h)).to.deep.equal(['cpuacct', 'freezer', 'pids']);
    const v2 = parseCgroupMounts('cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n', () => ['cpu', 'memory', 'pids']);
    expect(v2).to.deep.include({ version: 'v2', unified: '/sys/fs/cgroup' });
    expect(missingControllers(v2)).to.deep.equal([]);
    expect(parseCgroupMounts('cgroup /sys/fs/cgroup/cpu,cpuacct cgroup rw,cpu,cpuacct 0 0\n').v1).to.deep.equal({
      cpu: '/sys/fs/cgroup/cpu,cpuacct',
      cpuacct: '/sys/fs/cgroup/cpu,cpuacct',
    });
  });
  it("hostd's own cgroups from /proc/self/cgroup", () => {
    expect(parseProcCgroup('12:cpu,cpuacct:/system.slice/hostd.service\n4:memory:/\n0::/system.slice/hostd.service\n')).to.deep.equal({
      cpu: '/system.slice/hostd.service',
      cpuacct: '/system.slice/hostd.service',
      memory: '/',
      '': '/system.slice/hostd.service',
    });
  });
  it('net/dev, fib_trie, if_inet6, key-value files, lxc-info', () => {
    const dev =
      'Inter-|   Receive |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:     100       1    0    0    0     0          0         0      100       1    0    0    0     0       0          0\n  eth0:    2000      20    0    0    0     0          0         0     3000      30    0    0    0     0       0          0\n';
    expect(parseNetDev(dev)).to.deep.equal([{ name: 'eth0', rx_bytes: 2000, rx_packets: 20, tx_bytes: 3000, tx_packets: 30 }]);
    const fib =
      'Main:\n  +-- 0.0.0.0/0 3 0 5\n     |-- 0.0.0.0\n        /0 universe UNICAST\n     +-- 10.77.0.0/24 2 0 2\n        |-- 10.77.0.2\n           /32 host LOCAL\n        |-- 10.77.0.255\n           /32 link BROADCAST\n     |-- 127.0.0.1\n        /32 host LOCAL\n';
    expect(parseFibTrieLocal(fib)).to.deep.equal(['10.77.0.2']);
    expect(
      parseIfInet6(
        'fd000000000000000000000000000005 02 40 00 80 eth0\nfe800000000000000000000000000001 02 40 20 80 eth0\n00000000000000000000000000000001 01 80 10 80 lo\n',
      ),
    ).to.deep.equal(['fd00:0:0:0:0:0:0:5']);
    expect(parseKeyValues('usage_usec 12\nfrozen 1\n')).to.deep.equal({ usage_usec: 12, frozen: 1 });
    expect(parseLxcInfo('State:          RUNNING\nPID:            42\nIP:             10.0.0.2\n')).to.deep.equal({
      state: 'RUNNING',
      pid: 42,
      ips: ['10.0.0.2'],
    });
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
    expect(parseDumpe2fs('Block count:              65536\nFree blocks:              1000\nBlock size:               1024\n')).to.deep.equal({
      total_bytes: 65536 * 1024,
      free_bytes: 1000 * 1024,
    });
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
