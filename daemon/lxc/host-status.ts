/**
 * `GET /lxc/host-status`: what the host has for containers (the driver's
 * availability, asked fresh), what is missing and how to fix it, which
 * security module confines containers, and every container that breaks a
 * rule now.
 */
import type { ResultOf } from '../../api/registry/index.js';
import type { LxcContext } from './context.js';
import type { HostFacts } from './driver.js';

type HostStatus = ResultOf<'lxc_host_status'>;

/** Programs only some features use: their absence is not "missing". */
const OPTIONAL = new Set(['zfs', 'zstd']);

export class HostStatusReader {
  constructor(private readonly ctx: LxcContext) {}

  async hostStatus(): Promise<HostStatus> {
    const { ctx: c } = this;
    const h = await c.driver.host({ fresh: true });
    const programs = await c.driver.availability();
    const lxc = programs.find((a) => a.name === 'lxc-start')!;
    const missing: string[] = [];
    for (const a of programs) if (!a.available && !OPTIONAL.has(a.name)) missing.push(`${a.name}: ${a.reason}`);
    const bridge = c.settings.defaultBridge;
    const bridgeThere = bridge ? await c.driver.bridgeExists(bridge) : false;
    if (bridge && !bridgeThere) missing.push(`default bridge ${bridge} does not exist (lxc.default_bridge)`);
    const zfsPools: string[] = [];
    for (const pool of c.pools) if (await c.driver.storage.isZfs(pool.path)) zfsPools.push(pool.id);
    return {
      name: 'lxc',
      version: lxc.version,
      available: lxc.available,
      reason: lxc.reason,
      ready: missing.length === 0,
      programs,
      cgroup: { version: h.cgroups.version, controllers: h.cgroups.controllers, missing: h.cgroupMissing },
      idmap: { ...h.idmap, range: h.idrange },
      apparmor: h.apparmor,
      lsm: lsmStatus(h),
      allow_privileged: c.settings.allowPrivileged,
      violations: await this.allViolations(),
      lxc_path: c.settings.lxcPath,
      default_bridge: bridge ? { name: bridge, exists: bridgeThere } : null,
      image_server: c.settings.imageServer,
      zfs_pools: zfsPools,
      disk_limits: 'ext4 image per container, loop-mounted by LXC (lxc.rootfs.path = loop:...); ZFS refquota on linked clones',
      missing,
    };
  }

  /** Every container that breaks a rule now, with the rules. */
  private async allViolations(): Promise<HostStatus['violations']> {
    const out: HostStatus['violations'] = [];
    for (const rec of await this.ctx.records.all()) {
      for (const v of await this.ctx.violationsOf(rec)) out.push({ lxcid: rec.lxcid, name: rec.name, ...v });
    }
    return out;
  }
}

/**
 * Whether a Linux security module confines the containers: hostd gives them
 * LXC's generated AppArmor profile where the kernel has AppArmor, and sets no
 * SELinux context (an SELinux host runs them in hostd's own domain). Without
 * one, an unprivileged container holds on its user namespace, capability
 * drops and seccomp alone, and a privileged one on nothing.
 */
export function lsmStatus(p: Pick<HostFacts, 'apparmor' | 'selinux'>): HostStatus['lsm'] {
  const confines = p.apparmor;
  return {
    apparmor: p.apparmor,
    selinux: p.selinux,
    confines_containers: confines,
    profile: confines ? 'generated' : 'unconfined',
    note: confines
      ? "containers run under LXC's generated AppArmor profile"
      : 'no security module confines containers here: unprivileged containers rely on their user namespace, dropped capabilities and seccomp; a privileged container is root on the host',
  };
}
