/** Pure parts of the VM domain: command line, seed, partition tables, qemu-img output, catalog, settings, validation. */
import { spawnSync } from 'node:child_process';
import { expect } from 'chai';
import YAML from 'yaml';
import { machineArgs, macFor, shellSafePath, type MachineSpec } from '../../../daemon/vms/qemu/args.js';
import { renderSeed, type CloudInitSettings } from '../../../daemon/vms/qemu/seed.js';
import { needsRecovery, parsePartitions } from '../../../daemon/vms/qemu/identity.js';
import { parseBackingChain, parseImageInfo } from '../../../daemon/vms/qemu/img.js';
import { chooseAccel, parseMeminfo, versionOf } from '../../../daemon/vms/qemu/host.js';
import { BUNDLED_CATALOG, checksumFromSums, parseCatalog } from '../../../daemon/vms/catalog.js';
import { parseVmSettings } from '../../../daemon/vms/settings.js';
import { checkSshKey, checkUsername, hostnameOf, slug } from '../../../daemon/vms/common.js';
import { getOperation } from '../../../api/registry/index.js';
import { withPrefix } from '../../../api/registry/schema.js';
import { validateArgs } from '../../../api/validate.js';
import { formatSize } from '../../../daemon/vms/sizes.js';
import type { ApiError } from '../../../daemon/lib/errors.js';
import { requireOrSkip } from '../../helpers/runtime-gate.js';

const spec = (over: Partial<MachineSpec> = {}): MachineSpec => ({
  name: 'vm-101',
  uuid: '00000000-0000-4000-8000-000000000001',
  accel: 'tcg',
  cpuCores: 2,
  memoryMb: 768,
  runDir: '/run/h/vm-101',
  rootFile: '/pool/.vms/vm-101/root.qcow2',
  disks: [],
  seedIso: '/pool/.vms/vm-101/seed.iso',
  net: { type: 'user', mac: '52:54:00:00:00:01', sshPort: 2222, restrict: true },
  generationId: '3f2504e0-4f89-41d3-9a0c-0305e82c3301',
  ...over,
});

const valueAfter = (args: string[], flag: string): string[] => args.flatMap((a, i) => (args[i - 1] === flag ? [a] : []));

describe('vms: QEMU command line', () => {
  it('uses TCG with the max CPU, or KVM with the host CPU', () => {
    const t = machineArgs(spec());
    expect(valueAfter(t, '-accel')).to.deep.equal(['tcg']);
    expect(valueAfter(t, '-cpu')).to.deep.equal(['max']);
    const k = machineArgs(spec({ accel: 'kvm' }));
    expect(valueAfter(k, '-accel')).to.deep.equal(['kvm']);
    expect(valueAfter(k, '-cpu')).to.deep.equal(['host']);
    expect(valueAfter(machineArgs(spec({ tcgTbSizeMb: 256 })), '-accel')).to.deep.equal(['tcg,tb-size=256']);
  });

  it('puts every PCI device at a fixed slot, additional disks at their own', () => {
    const a = machineArgs(
      spec({
        disks: [
          { id: 'd1', file: '/p/disk-d1.qcow2', slot: 8 },
          { id: 'd3', file: '/p/disk-d3.qcow2', slot: 10 },
        ],
      }),
    );
    const devices = valueAfter(a, '-device');
    expect(devices).to.include('virtio-blk-pci,drive=root,id=dev-root,bus=pci.0,addr=0x4,bootindex=1');
    expect(devices).to.include('virtio-blk-pci,drive=disk-d1,id=dev-disk-d1,bus=pci.0,addr=0x8');
    expect(devices).to.include('virtio-blk-pci,drive=disk-d3,id=dev-disk-d3,bus=pci.0,addr=0xa');
    expect(devices).to.include('virtio-net-pci,netdev=net0,mac=52:54:00:00:00:01,id=dev-net0,bus=pci.0,addr=0x3');
    expect(devices).to.include('virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0');
  });

  it('forwards SSH on loopback only, restricted when asked; a bridge uses a tap script; none has no NIC', () => {
    expect(valueAfter(machineArgs(spec()), '-netdev')).to.deep.equal(['user,id=net0,hostfwd=tcp:127.0.0.1:2222-:22,restrict=on']);
    const b = machineArgs(spec({ net: { type: 'bridged', mac: '52:54:00:00:00:02', bridge: 'br0', ifupScript: '/d/ifup-br0' } }));
    expect(valueAfter(b, '-netdev')).to.deep.equal(['tap,id=net0,script=/d/ifup-br0,downscript=no']);
    const n = machineArgs(spec({ net: { type: 'none' } }));
    expect(valueAfter(n, '-netdev')).to.deep.equal([]);
    expect(valueAfter(n, '-device').some((d) => d.startsWith('virtio-net'))).to.equal(false);
  });

  it('keeps an empty CD-ROM without a seed, doubles commas in paths, daemonizes with a pidfile', () => {
    const a = machineArgs(spec({ seedIso: null, rootFile: '/p/a,b/root.qcow2' }));
    expect(valueAfter(a, '-drive')).to.deep.equal(['if=none,id=seed,media=cdrom']);
    expect(valueAfter(a, '-blockdev')[0]).to.equal('driver=qcow2,node-name=root,file.driver=file,file.filename=/p/a,,b/root.qcow2,discard=unmap');
    expect(a).to.include('-daemonize');
    expect(valueAfter(a, '-pidfile')).to.deep.equal(['/run/h/vm-101/qemu.pid']);
    expect(valueAfter(a, '-qmp')).to.deep.equal(['unix:/run/h/vm-101/qmp.sock,server=on,wait=off']);
  });

  it('resumes from a state file through exec:cat, refusing paths a shell would split', () => {
    expect(valueAfter(machineArgs(spec({ incoming: '/p/ws-1/memory.state' })), '-incoming')).to.deep.equal(['exec:cat /p/ws-1/memory.state']);
    expect(() => shellSafePath('/p/a b')).to.throw(/cannot be used/);
    expect(() => shellSafePath('/p/$(x)')).to.throw(/cannot be used/);
    expect(() => shellSafePath('relative')).to.throw(/cannot be used/);
  });

  it('gives the machine a VM generation ID device with its guid; none only to resume memory saved without one', () => {
    const devices = valueAfter(machineArgs(spec()), '-device');
    expect(devices).to.include('vmgenid,id=vmgenid0,guid=3f2504e0-4f89-41d3-9a0c-0305e82c3301');
    const resumed = valueAfter(machineArgs(spec({ incoming: '/p/ws-1/memory.state', generationId: 'a1b2c3d4-0000-4000-8000-00000000000a' })), '-device');
    expect(resumed.filter((d) => d.startsWith('vmgenid'))).to.deep.equal(['vmgenid,id=vmgenid0,guid=a1b2c3d4-0000-4000-8000-00000000000a']);
    expect(valueAfter(machineArgs(spec({ generationId: null })), '-device').some((d) => d.startsWith('vmgenid'))).to.equal(false);
    expect(() => machineArgs(spec({ generationId: 'x,id=evil' }))).to.throw(/not a lowercase UUID/);
  });

  it('gives locally administered MACs in the 52:54:00 range', () => {
    expect(macFor(101)).to.match(/^52:54:00:[0-9a-f]{2}:[0-9a-f]{2}:[0-9a-f]{2}$/);
    expect(macFor(101)).to.not.equal(macFor(102));
  });
});

const settings = (over: Partial<CloudInitSettings> = {}): CloudInitSettings => ({
  enabled: true,
  username: 'alice',
  ssh_public_key: 'ssh-ed25519 AAAAC3Nza alice@x',
  ssh_enabled: true,
  ssh_password_auth: false,
  dns_servers: [],
  ip_address: null,
  gateway: null,
  package_upgrade: false,
  network_type: 'user',
  network_bridge: null,
  ...over,
});

describe('vms: cloud-init seed', () => {
  it('creates the user with passwordless sudo and the key, and keeps SSH host keys (hostd re-keys)', () => {
    const f = renderSeed({ settings: settings(), instanceId: 'i-1', hostname: 'web', mac: '52:54:00:00:00:01', passwordHash: null });
    expect(f['user-data'].startsWith('#cloud-config\n')).to.equal(true);
    const u = YAML.parse(f['user-data']);
    expect(u.users).to.deep.equal([
      { name: 'alice', shell: '/bin/bash', sudo: 'ALL=(ALL) NOPASSWD:ALL', lock_passwd: true, ssh_authorized_keys: ['ssh-ed25519 AAAAC3Nza alice@x'] },
    ]);
    expect(u.ssh_deletekeys).to.equal(false);
    expect(u.ssh_pwauth).to.equal(false);
    expect(u.hostname).to.equal('web');
    expect(YAML.parse(f['meta-data'])).to.deep.equal({ 'instance-id': 'i-1', 'local-hostname': 'web' });
    expect(YAML.parse(f['network-config']!)).to.deep.equal({ version: 2, ethernets: { nic0: { match: { macaddress: '52:54:00:00:00:01' }, dhcp4: true } } });
  });

  it('carries a password only as a hash, a static address with gateway and DNS, and package upgrade', () => {
    const f = renderSeed({
      settings: settings({ ip_address: '10.0.0.5/24', gateway: '10.0.0.1', dns_servers: ['1.1.1.1'], package_upgrade: true, ssh_password_auth: true }),
      instanceId: 'i',
      hostname: 'h',
      mac: '52:54:00:00:00:09',
      passwordHash: '$6$salt$hash',
    });
    const u = YAML.parse(f['user-data']);
    expect(u.users[0].passwd).to.equal('$6$salt$hash');
    expect(u.users[0].lock_passwd).to.equal(false);
    expect(u.package_upgrade).to.equal(true);
    expect(u.ssh_pwauth).to.equal(true);
    expect(YAML.parse(f['network-config']!).ethernets.nic0).to.deep.equal({
      match: { macaddress: '52:54:00:00:00:09' },
      addresses: ['10.0.0.5/24'],
      routes: [{ to: '0.0.0.0/0', via: '10.0.0.1' }],
      nameservers: { addresses: ['1.1.1.1'] },
    });
  });

  it('disables SSH when asked, has no network config without a NIC, and can carry the seed file', () => {
    const f = renderSeed({
      settings: settings({ ssh_enabled: false, network_type: 'none' }),
      instanceId: 'i',
      hostname: 'h',
      mac: null,
      passwordHash: null,
      seedFallback: 'S',
    });
    const u = YAML.parse(f['user-data']);
    expect(u.runcmd).to.deep.equal([['systemctl', 'disable', '--now', 'ssh']]);
    expect(u.write_files).to.deep.equal([
      { path: '/etc/svc/seed', encoding: 'b64', content: Buffer.from('S').toString('base64'), permissions: '0600', owner: 'root:root' },
    ]);
    expect(f['network-config']).to.equal(undefined);
  });
});

/** cloud-init reads user-data with PyYAML (YAML 1.1); the same loader here, when the host has it. */
function pyYaml(text: string): unknown {
  const r = spawnSync('python3', ['-c', 'import sys, json, yaml; print(json.dumps(yaml.safe_load(sys.stdin.read())))'], { input: text, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`PyYAML refused the user-data: ${r.stderr.trim().split('\n').pop()}`);
  return JSON.parse(r.stdout);
}

const havePyYaml = spawnSync('python3', ['-c', 'import yaml'], { encoding: 'utf8' }).status === 0;

describe("vms: cloud-init seed under cloud-init's own YAML loader", () => {
  before(function () {
    requireOrSkip(this, 'vms', havePyYaml ? null : "python3 with the yaml module (cloud-init's loader, Debian python3-yaml) is not installed");
  });

  // YAML 1.1 takes NEL, LINE SEPARATOR and PARAGRAPH SEPARATOR for line breaks: inside a block
  // scalar they end the block, and what follows at column 0 becomes a key of its own.
  const hostile = ['\u2028', '\u2029', '\u0085'].map((b) => `seed\nline${b}runcmd: [[touch, /pwned]]${b}#`);

  it('carries any seed text through write_files unchanged and without adding keys', () => {
    for (const seed of hostile) {
      const f = renderSeed({ settings: settings(), instanceId: 'i', hostname: 'h', mac: null, passwordHash: null, seedFallback: seed });
      const u = pyYaml(f['user-data']) as Record<string, any>;
      expect(Object.keys(u).sort()).to.deep.equal(['hostname', 'manage_etc_hosts', 'package_upgrade', 'ssh_deletekeys', 'ssh_pwauth', 'users', 'write_files']);
      expect(u.write_files).to.have.length(1);
      expect(Buffer.from(u.write_files[0].content, u.write_files[0].encoding === 'b64' ? 'base64' : 'utf8').toString('utf8')).to.equal(seed);
    }
  });

  it('refuses SSH keys whose comment holds a YAML 1.1 line break, and reads every accepted value back as given', () => {
    for (const b of ['\u2028', '\u2029', '\u0085', '\t', '\u001b'])
      expect(() => checkSshKey(`ssh-ed25519 AAAAC3Nza me${b}runcmd: [[id]]`)).to.throw(/must be one OpenSSH public key line/);
    const key = checkSshKey('ssh-ed25519 AAAAC3Nza me: "quoted" #not-a-comment [x] {y} & *z');
    const f = renderSeed({
      settings: settings({ ssh_public_key: key, dns_servers: ['10.0.0.53'] }),
      instanceId: 'i-"x"',
      hostname: 'h',
      mac: '52:54:00:00:00:01',
      passwordHash: '$6$a$b',
    });
    const u = pyYaml(f['user-data']) as Record<string, any>;
    expect(u.users[0].ssh_authorized_keys).to.deep.equal([key]);
    expect(u.users[0].passwd).to.equal('$6$a$b');
    expect(pyYaml(f['meta-data'])).to.deep.equal({ 'instance-id': 'i-"x"', 'local-hostname': 'h' });
    expect((pyYaml(f['network-config']!) as any).ethernets.nic0.nameservers).to.deep.equal({ addresses: ['10.0.0.53'] });
  });
});

function mbrDisk(parts: Array<[number, number, number]>): Buffer {
  const b = Buffer.alloc(34 * 512);
  parts.forEach(([type, start, count], i) => {
    const e = 446 + i * 16;
    b[e + 4] = type;
    b.writeUInt32LE(start, e + 8);
    b.writeUInt32LE(count, e + 12);
  });
  b.writeUInt16LE(0xaa55, 510);
  return b;
}

describe('vms: partition tables and ext superblocks', () => {
  it('reads MBR partitions, skipping empty and extended entries', () => {
    const b = mbrDisk([
      [0x83, 2048, 4096],
      [0x05, 8192, 100],
      [0x82, 10000, 50],
    ]);
    expect(parsePartitions(b)).to.deep.equal([
      { offset: 2048 * 512, size: 4096 * 512 },
      { offset: 10000 * 512, size: 50 * 512 },
    ]);
  });

  it('reads GPT partitions behind a protective MBR', () => {
    const b = mbrDisk([[0xee, 1, 0xffffffff]]);
    b.write('EFI PART', 512, 'latin1');
    b.writeBigUInt64LE(2n, 512 + 72);
    b.writeUInt32LE(128, 512 + 80);
    b.writeUInt32LE(128, 512 + 84);
    const entry = (i: number, first: bigint, last: bigint) => {
      const e = 1024 + i * 128;
      b[e] = 0xaf; // a non-zero type GUID
      b.writeBigUInt64LE(first, e + 32);
      b.writeBigUInt64LE(last, e + 40);
    };
    entry(0, 262144n, 6291422n);
    entry(13, 2048n, 8191n);
    expect(parsePartitions(b)).to.deep.equal([
      { offset: 262144 * 512, size: (6291422 - 262144 + 1) * 512 },
      { offset: 2048 * 512, size: (8191 - 2048 + 1) * 512 },
    ]);
  });

  it('finds no partitions without the boot signature', () => {
    expect(parsePartitions(Buffer.alloc(4096))).to.deep.equal([]);
  });

  it('sees the journal-recovery flag in an ext superblock', () => {
    const sb = Buffer.alloc(1024);
    expect(needsRecovery(sb)).to.equal(false);
    sb.writeUInt32LE(0x2 | 0x4 | 0x40, 0x60);
    expect(needsRecovery(sb)).to.equal(true);
  });
});

describe('vms: qemu-img output', () => {
  it('parses info with a backing file, and a backing chain', () => {
    const one = {
      filename: '/a/clone.qcow2',
      format: 'qcow2',
      'virtual-size': 4294967296,
      'actual-size': 200704,
      'backing-filename': '/a/base.qcow2',
      'full-backing-filename': '/a/base.qcow2',
      'format-specific': { type: 'qcow2', data: { corrupt: false } },
    };
    expect(parseImageInfo(JSON.stringify(one))).to.deep.equal({
      format: 'qcow2',
      virtualSize: 4294967296,
      actualSize: 200704,
      backingFile: '/a/base.qcow2',
      corrupt: false,
    });
    const base = { filename: '/a/base.qcow2', format: 'raw', 'virtual-size': 1024, 'actual-size': 4096 };
    const chain = parseBackingChain(JSON.stringify([one, base]));
    expect(chain.map((c) => [c.format, c.backingFile])).to.deep.equal([
      ['qcow2', '/a/base.qcow2'],
      ['raw', null],
    ]);
    expect(() => parseImageInfo('{"format":"qcow2"}')).to.throw(/virtual-size/);
  });
});

describe('vms: host facts', () => {
  it('uses KVM only with vmx/svm, a usable /dev/kvm and no PVM', () => {
    const intel = 'processor\t: 0\nflags\t\t: fpu vme vmx sse2\n';
    expect(chooseAccel(intel, true, false)).to.deep.equal({ accel: 'kvm', reason: null });
    expect(chooseAccel(intel, true, true).accel).to.equal('tcg');
    expect(chooseAccel(intel, true, true).reason).to.match(/PVM/);
    expect(chooseAccel('flags\t\t: fpu sse2\n', true, false).reason).to.match(/no vmx or svm/);
    expect(chooseAccel('flags\t\t: fpu svm\n', false, false).reason).to.match(/\/dev\/kvm is missing/);
  });

  it('reads MemTotal and MemAvailable in MiB, and version numbers', () => {
    expect(parseMeminfo('MemTotal:       24683520 kB\nMemFree:  100 kB\nMemAvailable:   21651456 kB\n')).to.deep.equal({ totalMb: 24105, availableMb: 21144 });
    expect(versionOf('QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7)')).to.equal('7.2.22');
  });
});

describe('vms: catalog', () => {
  it('bundles Debian 12 and Ubuntu 24.04 with checksum lists', () => {
    expect(parseCatalog(BUNDLED_CATALOG, 'bundled').map((c) => c.id)).to.deep.equal(['debian-12', 'ubuntu-24.04']);
    expect(BUNDLED_CATALOG.every((c) => c.checksum_url?.startsWith('https://'))).to.equal(true);
  });

  it('refuses entries without a checksum, with bad ids or duplicates', () => {
    expect(() => parseCatalog([{ id: 'a', url: 'http://x/a' }], 'f')).to.throw('f[0] needs checksum or checksum_url');
    expect(() => parseCatalog([{ id: '../a', url: 'http://x/a', checksum_url: 'http://x/s' }], 'f')).to.throw(/id must be/);
    const e = { id: 'a', url: 'http://x/a', checksum: 'sha256:' + 'a'.repeat(64) };
    expect(() => parseCatalog([e, e], 'f')).to.throw(/appears twice/);
    expect(() => parseCatalog({}, 'f')).to.throw(/JSON array/);
  });

  it('finds a file in SHA256SUMS and SHA512SUMS lists', () => {
    const h256 = 'ab'.repeat(32);
    const h512 = 'cd'.repeat(64);
    expect(checksumFromSums(`${h256}  other.img\n${h256.replace('ab', 'ef')} *noble.img\n`, 'noble.img')).to.equal(`sha256:${h256.replace('ab', 'ef')}`);
    expect(checksumFromSums(`${h512}  debian-12-genericcloud-amd64.qcow2\n`, 'debian-12-genericcloud-amd64.qcow2')).to.equal(`sha512:${h512}`);
    expect(checksumFromSums('garbage\n', 'x')).to.equal(null);
  });
});

describe('vms: settings and argument checks', () => {
  const pools = [
    { id: 'p1', path: '/p1' },
    { id: 'p2', path: '/p2' },
  ];

  it('restricts user networking unless turned off, and lets VMs join only the configured bridges', () => {
    expect(parseVmSettings(undefined, pools).userNetRestrict).to.equal(true);
    expect(parseVmSettings({ user_net_restrict: false }, pools).userNetRestrict).to.equal(false);
    expect(parseVmSettings(undefined, pools).allowedBridges).to.deep.equal([]);
    expect(parseVmSettings({ bridge: 'vmbr0', allowed_bridges: ['vmbr1', 'vmbr0'] }, pools).allowedBridges).to.deep.equal(['vmbr0', 'vmbr1']);
    expect(() => parseVmSettings({ allowed_bridges: ['..'] }, pools)).to.throw(/vms.allowed_bridges must be a list of bridge names/);
    expect(() => parseVmSettings({ allowed_bridges: 'vmbr1' }, pools)).to.throw(/vms.allowed_bridges must be a list/);
  });

  it('defaults to user networking without a bridge, bridged with one', () => {
    expect(parseVmSettings(undefined, pools).network).to.equal('user');
    const s = parseVmSettings({ bridge: 'vmbr0', default_storage: 'p2' }, pools);
    expect([s.network, s.bridge, s.defaultStorage]).to.deep.equal(['bridged', 'vmbr0', 'p2']);
    expect(() => parseVmSettings({ nope: 1 }, pools)).to.throw(/vms.nope is not a known setting/);
    expect(() => parseVmSettings({ default_storage: 'p9' }, pools)).to.throw(/not a storage pool/);
    expect(() => parseVmSettings({ network: 'bridged' }, pools)).to.throw(/needs vms.bridge/);
  });

  const status = (f: () => unknown) => {
    try {
      f();
    } catch (err) {
      return [(err as ApiError).status, (err as ApiError).message];
    }
    return null;
  };

  it('checks addresses, DNS, user names and SSH keys with 400s naming the argument', () => {
    // Addresses and resolvers are the registry's rules (api/registry/schema.ts), applied before the service runs.
    const create = (args: Record<string, unknown>) => status(() => validateArgs(getOperation('vms_create')!, { name: 'a', image_id: 'b', ...args }));
    expect(withPrefix('10.0.0.5')).to.equal('10.0.0.5/24');
    expect(withPrefix('fd00::5/48')).to.equal('fd00::5/48');
    const cidrWords = "argument 'ip_address' must be an IPv4 or IPv6 address with an optional /prefix (1-32 or 1-128), or empty";
    expect(create({ ip_address: '10.0.0.300/24' })).to.deep.equal([400, cidrWords]);
    expect(create({ ip_address: '10.0.0.3/33' })).to.deep.equal([400, cidrWords]);
    expect(create({ dns_servers: ['1.1.1.1', 'dns.example'] })).to.deep.equal([400, "argument 'dns_servers[1]' must be an IPv4 or IPv6 address"]);
    expect(create({ ip_address: '10.0.0.5/24', gateway: '10.0.0.1', dns_servers: ['1.1.1.1'] })).to.equal(null);
    expect(status(() => checkUsername('Bob'))).to.deep.equal([
      400,
      "argument 'username' must be a Linux user name (lowercase letter or _, then up to 31 of [a-z0-9_-])",
    ]);
    expect(status(() => checkUsername('root'))?.[0]).to.equal(400);
    expect(checkSshKey(' ssh-ed25519 AAAAC3NzaC1 me@host \n')).to.equal('ssh-ed25519 AAAAC3NzaC1 me@host');
    expect(status(() => checkSshKey('ssh-ed25519 AAAA\nssh-rsa BBBB'))?.[0]).to.equal(400);
  });

  it('prints sizes below 1 GiB in MiB, larger ones in GiB with one decimal at most', () => {
    expect(formatSize(400 * 1024 ** 2)).to.equal('400 MiB');
    expect(formatSize(0)).to.equal('0 MiB');
    expect(formatSize(1024 ** 3)).to.equal('1 GiB');
    expect(formatSize(2.5 * 1024 ** 3)).to.equal('2.5 GiB');
    expect(formatSize(3 * 1024 ** 3 - 1)).to.equal('3 GiB');
  });

  it('derives hostnames and image ids from free-form names', () => {
    expect(hostnameOf('My Web Server!', 7)).to.equal('my-web-server');
    expect(hostnameOf('***', 7)).to.equal('vm-7');
    expect(slug('Base Image 2.0 (web)')).to.equal('base-image-2.0-web');
    expect(slug('../..')).to.equal('');
  });
});
