/**
 * The LXC config rendered from a record (id map, capability drops, cgroup
 * keys, network, mounts through their staging entries, no value that adds a
 * key), and the network files written into the guest.
 */
import { expect } from 'chai';
import { hostnameOf } from '../../../daemon/lxc/naming.js';
import { escapeMountField, renderConfig } from '../../../daemon/lxc/lxc-tools/config.js';
import { hostsFile, interfacesFile, networkdFile, resolvConf } from '../../../daemon/lxc/guest-files.js';
import type { ContainerRecord } from '../../../daemon/lxc/records.js';

describe('lxc config rendering', () => {
  const rec: ContainerRecord = {
    lxcid: 101,
    name: 'Web One',
    template: 'bb',
    template_storage_id: 'a',
    storage_id: 'a',
    rootfs_kind: 'loop',
    cpu_cores: 2,
    memory_mb: 256,
    disk_size_bytes: 1 << 30,
    privileged: false,
    idmap: { uid: 100000, gid: 200000, count: 65536 },
    nesting: false,
    environment: { A: 'b c' },
    network: { type: 'bridged', bridge: null, ip_address: '10.0.0.5/24', gateway: '10.0.0.1', dns_servers: [], hwaddr: '00:16:3e:00:00:01' },
    autostart: true,
    mount_points: [{ host_path: '/a/My Files', container_path: '/mnt/files', read_only: true }],
    linked_clone: false,
    rootfs_sync_pending: false,
    created_at: '',
    updated_at: '',
  };
  const input = {
    rec,
    lxcName: 'svc-lxc-101',
    rootfs: 'loop:/a/.hostd-lxc/containers/101/disk.img',
    bridge: 'br0',
    logFile: '/l/lxc.log',
    cgroupDirs: { container: 'hostd-x/ct-101', monitor: 'hostd-x/mon-101' },
    host: { cgroupKeys: 'v1' as const, apparmor: false },
    mountIsDir: () => true,
    mountSource: (i: number) => `/l/svc-lxc-101/mounts/${i}`,
  };

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
    const text = renderConfig({
      ...input,
      rec: { ...rec, privileged: true, idmap: null, nesting: true, network: { ...rec.network, type: 'none' } },
      host: { cgroupKeys: 'v2', apparmor: true },
    });
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
    for (const k of [
      'lxc.cap.keep',
      'lxc.seccomp.profile',
      'cgroup-full',
      'lxc.apparmor.allow_incomplete',
      'lxc.mount.entry = /proc',
      'lxc.mount.entry = /sys',
    ])
      expect(text).to.not.contain(k);
  });
  it('refuses to render a value with a line break (it would add a key)', () => {
    for (const r of [
      { ...rec, environment: { A: 'x\nlxc.cap.keep = sys_admin' } },
      { ...rec, mount_points: [{ host_path: '/a', container_path: '/mnt/x\nlxc.idmap =', read_only: true }] },
      { ...rec, network: { ...rec.network, ip_address: '10.0.0.5/24\r' } },
    ]) {
      expect(() => renderConfig({ ...input, rec: r })).to.throw(
        /^container 101: the value of lxc\.[a-z0-9.]+ holds a line break or NUL; the config is not written$/,
      );
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
