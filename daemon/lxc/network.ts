/**
 * A container's network: the settings of a create (the registry checked each
 * value's form; here the rules between them and the host), and the files
 * hostd keeps in a stopped rootfs so that the guest's own tools agree with
 * them (guest-files.ts renders them).
 */
import crypto from 'node:crypto';
import type { ArgsOf } from '../../api/registry/index.js';
import { checkGateway, withPrefix } from '../../api/registry/schema.js';
import { badRequest } from '../lib/errors.js';
import type { LxcContext } from './context.js';
import { hostsFile, interfacesFile, MANAGED_MARK, networkdFile, resolvConf } from './guest-files.js';
import type { ContainerRecord, NetworkSettings } from './model.js';
import { hostnameOf, randomHwaddr } from './naming.js';

/** The network of a new container: bridged when a bridge is named or configured, else none. */
export function networkFromCreate(ctx: LxcContext, a: ArgsOf<'lxc_create'>): NetworkSettings {
  const bridge = a.network_bridge || null;
  const type = a.network_type ?? (bridge || ctx.settings.defaultBridge ? 'bridged' : 'none');
  return {
    type,
    bridge,
    ip_address: a.ip_address ? withPrefix(a.ip_address) : null,
    gateway: a.gateway || null,
    dns_servers: [...(a.dns_servers ?? [])],
    hwaddr: randomHwaddr(crypto.randomBytes(3)),
  };
}

/** 400 unless the settings fit together and the bridge exists on this host. */
export async function checkNetwork(ctx: LxcContext, net: NetworkSettings): Promise<void> {
  if (net.type === 'bridged') {
    const br = ctx.effectiveBridge(net);
    if (!br) throw badRequest("argument 'network_type' bridged needs network_bridge (no default bridge is configured: set lxc.default_bridge)");
    if (!(await ctx.driver.bridgeExists(br))) throw badRequest(`argument 'network_bridge': bridge '${br}' does not exist on this host`);
  } else if (net.ip_address) {
    throw badRequest("argument 'ip_address' needs network_type bridged");
  }
  if (net.gateway && net.ip_address) checkGateway(net.gateway, net.ip_address);
}

/** Writes hostname, hosts, network config and DNS into a stopped rootfs. */
export async function writeGuestNetwork(ctx: LxcContext, rec: ContainerRecord, root: string): Promise<void> {
  const s = ctx.driver.storage;
  const hn = hostnameOf(rec.name, rec.lxcid);
  await s.writeGuestFile(root, 'etc/hostname', hn + '\n', 0o644, rec.idmap);
  await s.writeGuestFile(root, 'etc/hosts', hostsFile(await s.readGuestFile(root, 'etc/hosts'), hn), 0o644, rec.idmap);
  if (await s.guestHasDir(root, 'etc/network')) await s.writeGuestFile(root, 'etc/network/interfaces', interfacesFile(rec.network), 0o644, rec.idmap);
  const nd = networkdFile(rec.network);
  if (await s.guestHasDir(root, 'etc/systemd/network')) {
    if (nd) await s.writeGuestFile(root, 'etc/systemd/network/eth0.network', nd, 0o644, rec.idmap);
    else await s.removeGuestFileIfManaged(root, 'etc/systemd/network/eth0.network', MANAGED_MARK);
  }
  const rc = resolvConf(rec.network);
  if (rc) await s.writeGuestFile(root, 'etc/resolv.conf', rc, 0o644, rec.idmap);
  else await s.removeGuestFileIfManaged(root, 'etc/resolv.conf', MANAGED_MARK);
}
