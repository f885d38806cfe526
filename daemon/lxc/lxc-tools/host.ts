/**
 * What this host has for LXC containers: the programs (with versions), the
 * cgroup layout, whether root owns a subordinate id range for unprivileged
 * containers, AppArmor, ZFS. Checked at open and on every host-status call.
 */
import fs from 'node:fs';
import { run, which } from '../../lib/run.js';
import { availableAs, missing, type Availability } from '../../lib/availability.js';
import { CGROUPS, IDMAP, type HostFacts } from '../driver.js';
import type { IdRange } from '../settings.js';
import { missingControllers, readCgroupLayout } from './cgroups.js';

/** Programs hostd runs, what each is for, and the package that has it. */
export const PROGRAMS: Array<{ name: string; pkg: string; for: string; versionArgs?: string[]; optional?: boolean }> = [
  { name: 'lxc-start', pkg: 'lxc', for: 'containers', versionArgs: ['--version'] },
  { name: 'lxc-stop', pkg: 'lxc', for: 'containers' },
  { name: 'lxc-attach', pkg: 'lxc', for: 'exec' },
  { name: 'lxc-info', pkg: 'lxc', for: 'state' },
  { name: 'lxc-freeze', pkg: 'lxc', for: 'freeze' },
  { name: 'lxc-unfreeze', pkg: 'lxc', for: 'unfreeze' },
  { name: 'lxc-cgroup', pkg: 'lxc', for: 'live limits' },
  { name: 'lxc-usernsexec', pkg: 'lxc', for: 'unpacking images into unprivileged containers' },
  { name: 'newuidmap', pkg: 'uidmap', for: 'id maps of unprivileged containers' },
  { name: 'newgidmap', pkg: 'uidmap', for: 'id maps of unprivileged containers' },
  { name: 'tar', pkg: 'tar', for: 'images', versionArgs: ['--version'] },
  { name: 'xz', pkg: 'xz-utils', for: 'xz images' },
  { name: 'zstd', pkg: 'zstd', for: 'captured templates (gzip is used without it)', optional: true },
  { name: 'mkfs.ext4', pkg: 'e2fsprogs', for: 'disk limits' },
  { name: 'e2fsck', pkg: 'e2fsprogs', for: 'disk limits' },
  { name: 'resize2fs', pkg: 'e2fsprogs', for: 'disk limits' },
  { name: 'dumpe2fs', pkg: 'e2fsprogs', for: 'disk usage of limited containers' },
  { name: 'setfacl', pkg: 'acl', for: 'traverse rights of unprivileged containers on rootfs parents' },
  { name: 'bash', pkg: 'bash', for: 'image pipelines' },
  { name: 'zfs', pkg: 'zfsutils-linux', for: 'linked clones on ZFS pools', optional: true },
];

export interface IdmapStatus {
  ready: boolean;
  uid_range: { start: number; count: number } | null;
  gid_range: { start: number; count: number } | null;
  reason: string | null;
}

/** root's ranges in an /etc/subuid-style text. */
export function parseSubIds(text: string, user = 'root'): Array<{ start: number; count: number }> {
  const out = [];
  for (const line of text.split('\n')) {
    const [u, s, c] = line.trim().split(':');
    if (u !== user && u !== '0') continue;
    const start = Number(s);
    const count = Number(c);
    if (Number.isInteger(start) && Number.isInteger(count) && count > 0) out.push({ start, count });
  }
  return out;
}

function readOr(p: string): string {
  try {
    return fs.readFileSync(p, 'utf8');
  } catch {
    return '';
  }
}

/**
 * Whether unprivileged containers can run: LXC (as root, with newuidmap on
 * the system) insists on root owning the mapped range in /etc/subuid and
 * /etc/subgid. With `want` set (lxc.idmap in the config), that range must be
 * covered; otherwise root's first range of at least 65536 ids is used.
 */
export function idmapStatus(subuid: string, subgid: string, want: IdRange | null): IdmapStatus & { range: IdRange | null } {
  const us = parseSubIds(subuid);
  const gs = parseSubIds(subgid);
  const fix = 'usermod --add-subuids 100000-165535 --add-subgids 100000-165535 root';
  if (want) {
    const u = us.find((r) => r.start <= want.uid && r.start + r.count >= want.uid + want.count) ?? null;
    const g = gs.find((r) => r.start <= want.gid && r.start + r.count >= want.gid + want.count) ?? null;
    const ok = Boolean(u && g);
    return {
      ready: ok,
      uid_range: u,
      gid_range: g,
      range: ok ? want : null,
      reason: ok
        ? null
        : `root has no range in /etc/subuid and /etc/subgid covering lxc.idmap (${want.uid}+${want.count}, ${want.gid}+${want.count}); add one with usermod --add-subuids/--add-subgids`,
    };
  }
  const u = us.find((r) => r.count >= 65536) ?? null;
  const g = gs.find((r) => r.count >= 65536) ?? null;
  if (!u || !g) {
    return {
      ready: false,
      uid_range: u,
      gid_range: g,
      range: null,
      reason: `root has no range of 65536 ids in /etc/subuid and /etc/subgid (needed for unprivileged containers): run '${fix}'`,
    };
  }
  return { ready: true, uid_range: u, gid_range: g, range: { uid: u.start, gid: g.start, count: 65536 }, reason: null };
}

export async function probeHost(want: IdRange | null): Promise<HostFacts> {
  const programs = await Promise.all(
    PROGRAMS.map(async (p): Promise<Availability> => {
      const at = await which(p.name);
      if (!at) return missing(p.name, `not installed (install the ${p.pkg} package; used for ${p.for})`);
      let version: string | null = null;
      if (p.versionArgs) {
        try {
          const r = await run(p.name, p.versionArgs, { timeoutMs: 10_000, okCodes: [0, 1] });
          version =
            (r.stdout || r.stderr)
              .split('\n')[0]
              .trim()
              .replace(/^.*?(\d+\.\d+(\.\d+)?).*$/, '$1') || null;
        } catch {
          version = null;
        }
      }
      return availableAs(p.name, version);
    }),
  );
  const cgroups = readCgroupLayout();
  const apparmor = readOr('/sys/module/apparmor/parameters/enabled').trim() === 'Y';
  const enforce = readOr('/sys/fs/selinux/enforce').trim();
  const selinux = enforce === '1' ? 'enforcing' : enforce === '0' ? 'permissive' : null;
  const idm = idmapStatus(readOr('/etc/subuid'), readOr('/etc/subgid'), want);
  const { range, ...idmap } = idm;
  return {
    programs,
    lxcVersion: programs.find((p) => p.name === 'lxc-start')?.version ?? null,
    cgroups: { version: cgroups.version, controllers: cgroups.controllers },
    cgroupMissing: missingControllers(cgroups),
    apparmor,
    selinux,
    idmap,
    idrange: range,
  };
}

/**
 * What availability() reports: the programs, and two entries for what the
 * containers need besides them (the cgroup controllers mounted, root's
 * subordinate id range), so that a call missing either is a 503 naming it,
 * the same way as a missing program.
 */
export function availabilityOf(h: HostFacts): Availability[] {
  const cg = h.cgroupMissing.length
    ? missing(CGROUPS, `the cgroup controllers ${h.cgroupMissing.join(', ')} are not mounted (LXC needs them for limits, freeze and stats)`)
    : availableAs(CGROUPS, h.cgroups.version);
  const idm = h.idmap.ready ? availableAs(IDMAP, null) : missing(IDMAP, `unprivileged containers cannot run: ${h.idmap.reason}`);
  return [...h.programs, cg, idm];
}

/**
 * Whether `name` is a bridge in hostd's network namespace: /sys/class/net says
 * so at once; when it does not (sysfs mounted for another namespace, as under
 * nsenter), `ip -d link` asks the kernel of this namespace.
 */
export async function bridgeExists(name: string): Promise<boolean> {
  try {
    if (fs.statSync(`/sys/class/net/${name}/bridge`).isDirectory()) return true;
  } catch {
    /* ask ip */
  }
  try {
    const r = await run('ip', ['-d', '-j', 'link', 'show', 'dev', name], { timeoutMs: 10_000, okCodes: [0, 1, 255] });
    if (r.code !== 0) return false;
    const links = JSON.parse(r.stdout) as Array<{ linkinfo?: { info_kind?: string } }>;
    return links.some((l) => l.linkinfo?.info_kind === 'bridge');
  } catch {
    return false;
  }
}
