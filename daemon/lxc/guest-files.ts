/**
 * The files hostd keeps inside a container's rootfs so that the guest's own
 * network tools agree with its record: /etc/hostname, /etc/hosts' own line,
 * /etc/resolv.conf, /etc/network/interfaces (ifupdown and busybox ifup) and
 * /etc/systemd/network/eth0.network (systemd-networkd). Pure rendering; which
 * of them is written depends on what the rootfs has (network.ts).
 *
 * LXC also sets a static address on eth0 itself before init runs
 * (lxc.net.0.ipv4.address), so a guest with no network tool still has it.
 */
import type { NetworkSettings } from './model.js';

export const MANAGED_MARK = '# Managed by hostd (network settings of this container); rewritten when they change.';

function cidrParts(cidr: string): { addr: string; prefix: number; family: 4 | 6 } {
  const [addr, p] = cidr.split('/');
  return { addr, prefix: Number(p), family: addr.includes(':') ? 6 : 4 };
}

function netmask(prefix: number): string {
  const m = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  return [24, 16, 8, 0].map((s) => (m >>> s) & 255).join('.');
}

export function resolvConf(net: NetworkSettings): string | null {
  if (net.dns_servers.length === 0) return null;
  return `${MANAGED_MARK}\n${net.dns_servers.map((s) => `nameserver ${s}`).join('\n')}\n`;
}

export function interfacesFile(net: NetworkSettings): string {
  const lines = [MANAGED_MARK, 'auto lo', 'iface lo inet loopback', ''];
  if (net.type === 'bridged') {
    lines.push('auto eth0');
    if (net.ip_address) {
      const c = cidrParts(net.ip_address);
      if (c.family === 4) {
        lines.push('iface eth0 inet static', `    address ${c.addr}`, `    netmask ${netmask(c.prefix)}`);
      } else {
        lines.push('iface eth0 inet6 static', `    address ${c.addr}`, `    netmask ${c.prefix}`);
      }
      if (net.gateway) lines.push(`    gateway ${net.gateway}`);
      if (net.dns_servers.length) lines.push(`    dns-nameservers ${net.dns_servers.join(' ')}`);
    } else {
      lines.push('iface eth0 inet dhcp');
    }
  }
  return lines.join('\n') + '\n';
}

export function networkdFile(net: NetworkSettings): string | null {
  if (net.type !== 'bridged') return null;
  const lines = [MANAGED_MARK, '[Match]', 'Name=eth0', '', '[Network]'];
  if (net.ip_address) {
    lines.push(`Address=${net.ip_address}`);
    if (net.gateway) lines.push(`Gateway=${net.gateway}`);
  } else {
    lines.push('DHCP=yes');
  }
  for (const d of net.dns_servers) lines.push(`DNS=${d}`);
  return lines.join('\n') + '\n';
}

export function hostsFile(existing: string | null, hostname: string): string {
  const keep = (existing ?? '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n').split('\n').filter((l) => !/^127\.0\.1\.1\s/.test(l));
  while (keep.length && keep[keep.length - 1] === '') keep.pop();
  return [...keep, `127.0.1.1\t${hostname}`].join('\n') + '\n';
}
