/**
 * Renders a container's LXC config file from its record. Pure: the same record
 * and host facts give the same text, so the file can be rewritten at every
 * open and a crash between a record write and a config write heals itself.
 *
 * Key choices (see docs/lxc.md):
 * - common.conf for every container: LXC's default seccomp profile, the device
 *   allow-list and the capability drops;
 * - unprivileged (the default): an id map (`lxc.idmap`), and the capability
 *   drops stated again because a user namespace starts from a full set;
 * - cgroup limits with v1 keys (`lxc.cgroup.*`) on v1 and hybrid hosts and v2
 *   keys (`lxc.cgroup2.*`) on unified hosts: LXC ignores the other kind;
 * - AppArmor: LXC's generated profile where the kernel has AppArmor, else
 *   unconfined (there is nothing to confine with);
 * - mount points: LXC binds each one's staging entry, never the host path
 *   itself (mounts.ts says why).
 */
import type { ContainerRecord, MountPoint } from '../model.js';
import { hostnameOf } from '../naming.js';

export interface HostFacts {
  /** Which cgroup keys LXC honours: v1 for legacy and hybrid hierarchies. */
  cgroupKeys: 'v1' | 'v2';
  apparmor: boolean;
}

export interface RenderInput {
  rec: ContainerRecord;
  lxcName: string;
  /** `dir:/abs`, `loop:/abs/disk.img`. */
  rootfs: string;
  /** The bridge a bridged container attaches to (already resolved against the default). */
  bridge: string | null;
  logFile: string;
  /** lxc.cgroup.dir.container / .monitor: a cgroup of this hostd's own. */
  cgroupDirs: { container: string; monitor: string };
  host: HostFacts;
  /** Whether each mount point's host path is a directory (else a file). */
  mountIsDir: (m: MountPoint) => boolean;
  /**
   * What LXC mounts for mount point `index`: its staging entry, on which the
   * start binds the descriptor of the checked host path (mounts.ts).
   */
  mountSource: (index: number) => string;
}

export const COMMON_CONF = '/usr/share/lxc/config/common.conf';
/** Capabilities dropped in every container (common.conf's list). */
export const DROPPED_CAPS = ['mac_admin', 'mac_override', 'sys_time', 'sys_module', 'sys_rawio'];
export const CPU_PERIOD_US = 100_000;

/** fstab-style escaping for lxc.mount.entry fields (space, tab and backslash as octal). */
export function escapeMountField(p: string): string {
  return p.replace(/[\\ \t]/g, (c) => '\\' + c.charCodeAt(0).toString(8).padStart(3, '0'));
}

function ipFamily(cidr: string): 4 | 6 {
  return cidr.includes(':') ? 6 : 4;
}

export function renderConfig(input: RenderInput): string {
  const { rec, host } = input;
  const out: string[] = [];
  const set = (k: string, v: string | number) => {
    // One key per line: a line break in a value would add a key of the value's choosing (the
    // service refuses such values; this holds for records that came any other way too).
    if (/[\n\r\0]/.test(String(v))) throw new Error(`container ${rec.lxcid}: the value of ${k} holds a line break or NUL; the config is not written`);
    out.push(`${k} = ${v}`);
  };
  out.push('# Written by hostd from its record of this container; manual edits are overwritten.');
  set('lxc.include', COMMON_CONF);
  set('lxc.uts.name', hostnameOf(rec.name, rec.lxcid));
  set('lxc.rootfs.path', input.rootfs);
  set('lxc.log.file', input.logFile);
  set('lxc.log.level', 'WARN');
  set('lxc.cgroup.dir.container', input.cgroupDirs.container);
  set('lxc.cgroup.dir.monitor', input.cgroupDirs.monitor);
  if (host.apparmor) {
    set('lxc.apparmor.profile', 'generated');
    set('lxc.apparmor.allow_nesting', rec.nesting ? 1 : 0);
  } else {
    set('lxc.apparmor.profile', 'unconfined');
  }

  if (!rec.privileged && rec.idmap) {
    set('lxc.idmap', `u 0 ${rec.idmap.uid} ${rec.idmap.count}`);
    set('lxc.idmap', `g 0 ${rec.idmap.gid} ${rec.idmap.count}`);
    // /dev/lxc cannot hold bind mounts made from inside a user namespace.
    set('lxc.tty.dir', '');
    set('lxc.cap.drop', DROPPED_CAPS.join(' '));
  }

  if (rec.nesting) {
    // Nested LXC needs writable proc, sys and cgroup, and uncovered copies of proc and sys.
    set('lxc.mount.auto', '');
    set('lxc.mount.auto', 'proc:rw sys:rw cgroup:rw');
    set('lxc.mount.entry', 'proc dev/.lxc/proc proc create=dir,optional 0 0');
    set('lxc.mount.entry', 'sys dev/.lxc/sys sysfs create=dir,optional 0 0');
  }

  const quota = rec.cpu_cores * CPU_PERIOD_US;
  const memBytes = rec.memory_mb * 1024 * 1024;
  if (host.cgroupKeys === 'v2') {
    set('lxc.cgroup2.cpu.max', `${quota} ${CPU_PERIOD_US}`);
    set('lxc.cgroup2.memory.max', memBytes);
  } else {
    set('lxc.cgroup.cpu.cfs_period_us', CPU_PERIOD_US);
    set('lxc.cgroup.cpu.cfs_quota_us', quota);
    set('lxc.cgroup.memory.limit_in_bytes', memBytes);
  }

  const net = rec.network;
  if (net.type === 'bridged' && input.bridge) {
    set('lxc.net.0.type', 'veth');
    set('lxc.net.0.link', input.bridge);
    set('lxc.net.0.flags', 'up');
    set('lxc.net.0.name', 'eth0');
    set('lxc.net.0.hwaddr', net.hwaddr);
    if (net.ip_address) {
      const fam = ipFamily(net.ip_address);
      set(`lxc.net.0.ipv${fam}.address`, net.ip_address);
      if (net.gateway && ipFamily(net.gateway) === fam) set(`lxc.net.0.ipv${fam}.gateway`, net.gateway);
    }
  } else {
    set('lxc.net.0.type', 'empty');
  }

  for (const [k, v] of Object.entries(rec.environment)) set('lxc.environment', `${k}=${v}`);

  for (const [i, m] of rec.mount_points.entries()) {
    const opts = ['bind', input.mountIsDir(m) ? 'create=dir' : 'create=file'];
    if (m.read_only) opts.push('ro');
    set('lxc.mount.entry', `${escapeMountField(input.mountSource(i))} ${escapeMountField(m.container_path.replace(/^\/+/, ''))} none ${opts.join(',')} 0 0`);
  }

  set('lxc.start.auto', rec.autostart ? 1 : 0);
  return out.join('\n') + '\n';
}
