/**
 * Bridged networking inside a network namespace the test makes: hostd runs in
 * it, the bridge and its address live in it, and the containers' veths attach
 * to it. Nothing leaves the namespace; the test removes it (and with it the
 * bridge) at the end.
 *
 * hostd is started through nsenter (network namespace) and a private mount
 * namespace where /sys is a sysfs of the test's network namespace (LXC finds
 * bridges there) with the host's cgroup hierarchies bound back under it.
 */
import { expect } from 'chai';
import { execFileSync, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { cleanupLxc, lxcEnv, requireLxc, type LxcEnv } from '../../helpers/lxc-env.js';
import { tempDir } from '../../helpers/daemon.js';

describe('lxc runtime: bridged networking with static addresses', function () {
  this.timeout(120_000);
  const ns = `hdlx${crypto.randomBytes(3).toString('hex')}`;
  let env: LxcEnv;
  let a: number;
  let b: number;

  before(async function () {
    await requireLxc(this);
    execFileSync('ip', ['netns', 'add', ns]);
    const inNs = (...args: string[]) => execFileSync('ip', ['-n', ns, ...args]);
    inNs('link', 'set', 'lo', 'up');
    inNs('link', 'add', 'br0', 'type', 'bridge');
    inNs('addr', 'add', '10.77.0.1/24', 'dev', 'br0');
    inNs('link', 'set', 'br0', 'up');
    const stash = tempDir('hostd-lxc-cg-');
    const script =
      'set -e; stash="$1"; shift; mount --rbind /sys/fs/cgroup "$stash"; mount -t sysfs sysfs /sys; mount --rbind "$stash" /sys/fs/cgroup; umount -l "$stash"; exec "$@"';
    env = await lxcEnv({
      wrap: ['nsenter', `--net=/run/netns/${ns}`, 'unshare', '-m', '--propagation', 'slave', 'sh', '-c', script, 'sh', stash],
      netns: ns,
      lxcYaml: '  default_bridge: br0',
    });
  });
  after(async () => {
    await cleanupLxc();
    spawnSync('ip', ['netns', 'del', ns]);
  });

  const exec = async (id: number, command: string) => {
    const r = await env.req('POST', `/lxc/${id}/exec`, { command });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    return r.body as { exit_code: number; stdout: string; stderr: string };
  };

  it('creates bridged containers (the default with a default bridge) with static IP, gateway and DNS', async () => {
    const r1 = await env.req('POST', '/lxc', { name: 'net a', template: 'bb', ip_address: '10.77.0.2/24', gateway: '10.77.0.1', dns_servers: ['10.77.0.1'] });
    expect(r1.status, JSON.stringify(r1.body)).to.equal(201);
    a = r1.body.container.lxcid;
    expect(r1.body.container.network).to.deep.include({
      type: 'bridged',
      bridge: 'br0',
      bridge_is_default: true,
      ip_address: '10.77.0.2/24',
      gateway: '10.77.0.1',
      dns_servers: ['10.77.0.1'],
    });
    const r2 = await env.req('POST', '/lxc', { name: 'net b', template: 'bb', network_type: 'bridged', network_bridge: 'br0', ip_address: '10.77.0.3' });
    expect(r2.status, JSON.stringify(r2.body)).to.equal(201);
    b = r2.body.container.lxcid;
    expect(r2.body.container.network).to.deep.include({ bridge: 'br0', bridge_is_default: false, ip_address: '10.77.0.3/24' });
    const bad = await env.req('POST', '/lxc', { name: 'net c', template: 'bb', ip_address: '10.77.0.4/24', gateway: '10.88.0.1' });
    expect(bad.status).to.equal(400);
    expect(bad.body).to.deep.equal({ error: "argument 'gateway' is outside 10.77.0.4/24" });
  });

  it('writes the network settings into the guest before it boots', async () => {
    const root = path.join(env.pools.p1, '.hostd-lxc/containers', String(a), 'rootfs');
    expect(fs.readFileSync(path.join(root, 'etc/network/interfaces'), 'utf8')).to.equal(
      '# Managed by hostd (network settings of this container); rewritten when they change.\n' +
        'auto lo\niface lo inet loopback\n\nauto eth0\niface eth0 inet static\n    address 10.77.0.2\n    netmask 255.255.255.0\n    gateway 10.77.0.1\n    dns-nameservers 10.77.0.1\n',
    );
    expect(fs.readFileSync(path.join(root, 'etc/resolv.conf'), 'utf8')).to.contain('nameserver 10.77.0.1\n');
    expect(fs.readFileSync(path.join(root, 'etc/hostname'), 'utf8')).to.equal('net-a\n');
  });

  it('containers reach each other and the gateway on the bridge; traffic stays in the namespace', async () => {
    for (const id of [a, b]) {
      const s = await env.req('POST', `/lxc/${id}/start`);
      expect(s.status, JSON.stringify(s.body)).to.equal(200);
    }
    const addr = await exec(a, 'ip -4 addr show eth0; ip route');
    expect(addr.stdout).to.contain('inet 10.77.0.2/24');
    expect(addr.stdout).to.contain('default via 10.77.0.1');
    const ping = await exec(a, 'ping -c 1 -W 5 10.77.0.3 >/dev/null && ping -c 1 -W 5 10.77.0.1 >/dev/null; echo rc=$?');
    expect(ping.stdout).to.equal('rc=0\n');
    // The host's own namespace never sees these addresses.
    const hostRoute = spawnSync('ip', ['-o', 'addr', 'show', 'to', '10.77.0.0/24']).stdout.toString();
    expect(hostRoute).to.equal('');
  });

  it('stats show eth0 traffic and the address', async () => {
    const r = await env.req('GET', `/lxc/${a}/stats`);
    expect(r.status).to.equal(200);
    const eth0 = r.body.stats.network.interfaces.find((i: any) => i.name === 'eth0');
    expect(eth0.tx_packets).to.be.above(0);
    expect(eth0.rx_bytes).to.be.above(0);
    expect(r.body.stats.network.addresses).to.include('10.77.0.2');
  });

  it('PATCH network: clearing the address reverts to DHCP at the next start', async () => {
    const r = await env.req('PATCH', `/lxc/${b}`, { ip_address: '', dns_servers: ['10.77.0.9'] });
    expect(r.status).to.equal(200);
    expect(r.body.restart_required).to.equal(true);
    expect(r.body.container.network).to.deep.include({ ip_address: null, dns_servers: ['10.77.0.9'] });
    expect(r.body.container.pending_restart).to.equal(true);
    expect((await env.req('POST', `/lxc/${b}/restart`)).status).to.equal(200);
    const root = path.join(env.pools.p1, '.hostd-lxc/containers', String(b), 'rootfs');
    expect(fs.readFileSync(path.join(root, 'etc/network/interfaces'), 'utf8')).to.contain('iface eth0 inet dhcp');
    expect((await exec(b, 'cat /etc/resolv.conf')).stdout).to.contain('nameserver 10.77.0.9');
    expect((await exec(b, 'ip -4 addr show eth0')).stdout).to.not.contain('10.77.0.3');
    const none = await env.req('PATCH', `/lxc/${b}`, { network_type: 'none' });
    expect(none.status).to.equal(200);
    expect((await env.req('POST', `/lxc/${b}/restart`)).status).to.equal(200);
    expect((await exec(b, 'ls /sys/class/net | sort | tr "\\n" " "')).stdout).to.equal('lo ');
  });
});
