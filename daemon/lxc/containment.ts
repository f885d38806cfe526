/**
 * The LXC domain's containment rules in one place: privileged containers
 * only behind `lxc.allow_privileged`, and mount points only from managed
 * folders and `lxc.mount_roots` (the host-path rule of daemon/lib/host-paths.ts,
 * with this domain's roots). The service checks them when a container is
 * created, cloned or changed, and again at every start and exec: a folder
 * may have been renamed, deleted or swapped for a symlink since, and a record
 * may predate the rules (an upgraded host). At a start the rule is applied
 * once more to where the descriptors LXC will mount really lead
 * (`judgeMount`), so a swap after the check mounts nothing else. Nothing here
 * deletes anything.
 */
import path from 'node:path';
import type { PoolConfig } from '../config.js';
import type { FolderRef } from '../domain.js';
import { normalContainerPath } from '../../api/registry/schema.js';
import { badRequest, forbidden, type ApiError } from '../lib/errors.js';
import { judgeHostPath, realRoots, resolveReal, type HostPathPolicy } from '../lib/host-paths.js';
import type { ContainerRecord, MountPoint } from './model.js';

export const MOUNT_RULE = 'containers may mount only managed folders and lxc.mount_roots, never a storage pool root or a directory hostd keeps for itself';
export const PRIVILEGED_SETTING = 'lxc.allow_privileged';

export interface Violation {
  rule: 'lxc.allow_privileged' | 'mount_points';
  /** The mount point concerned (mount_points rule). */
  container_path?: string;
  message: string;
}

export interface PolicySources {
  folders: FolderRef[];
  mountRoots: string[];
  pools: PoolConfig[];
  dataDir: string;
  lxcPath: string;
}

/** The host-path policy for mount points, on real paths (read anew for every check: folders change). */
export async function mountPolicy(src: PolicySources): Promise<HostPathPolicy> {
  const allowed = await realRoots([
    ...src.folders.map((f) => ({ path: f.path, label: `managed folder '${f.name}'` })),
    ...src.mountRoots.map((r) => ({ path: r, label: 'lxc.mount_roots' })),
  ]);
  const poolRoots = (await realRoots(src.pools.map((p) => ({ path: p.path })))).map((r) => r.path);
  const priv = await realRoots([
    { path: src.dataDir, label: 'data directory' },
    { path: src.lxcPath, label: 'LXC path (lxc.lxc_path)' },
  ]);
  return { allowed, poolRoots, private: priv };
}

/** 403 for a request that asks for what a privileged container gives, while the setting is off. */
export function privilegedRefused(what: string): ApiError {
  return forbidden(`${what}: privileged containers are turned off on this host (${PRIVILEGED_SETTING} is false); a privileged container is root on the host`);
}

/**
 * Checks the mount points of a create (the registry checked their form): each
 * host path must exist and its real path pass the host-path rule; the stored
 * path is the real one, so a later swap is seen at start. 400 naming the
 * argument and the rule.
 */
export async function checkNewMounts(list: readonly MountPoint[], policy: HostPathPolicy): Promise<MountPoint[]> {
  const out: MountPoint[] = [];
  const seen = new Set<string>();
  for (const [i, m] of list.entries()) {
    const arg = `mount_points[${i}].host_path`;
    if (!path.isAbsolute(m.host_path) || /[\u0000-\u001f\u007f]/u.test(m.host_path))
      throw badRequest(`argument '${arg}' must be an absolute host path without control characters`);
    const real = await resolveReal(m.host_path);
    if (real === null) throw badRequest(`argument '${arg}' does not exist on the host`);
    const v = judgeHostPath(real, policy);
    if (!v.ok) throw badRequest(`argument '${arg}' ${v.reason}: ${MOUNT_RULE}`);
    const cp = normalContainerPath(m.container_path, `mount_points[${i}].container_path`);
    if (seen.has(cp)) throw badRequest(`argument 'mount_points[${i}].container_path' is given twice`);
    seen.add(cp);
    out.push({ host_path: real, container_path: cp, read_only: m.read_only });
  }
  return out;
}

/** What a stored mount point breaks now, or null. */
export async function mountViolation(m: MountPoint, policy: HostPathPolicy): Promise<string | null> {
  return judgeMount(m, await resolveReal(m.host_path), null, policy);
}

/**
 * What a stored mount point breaks, given where its host path leads now
 * (`real`: by its path, or by a descriptor opened on it) and why it cannot be
 * mounted whatever the rule says (`problem`), or null.
 */
export function judgeMount(m: MountPoint, real: string | null, problem: string | null, policy: HostPathPolicy): string | null {
  if (real === null) return `mount point ${m.container_path}: its host path ${m.host_path} no longer exists`;
  // Stored real at create: a different real path now means a component was renamed or replaced by a symlink.
  if (real !== m.host_path)
    return `mount point ${m.container_path}: its host path ${m.host_path} now resolves elsewhere (a component was replaced by a symlink)`;
  const v = judgeHostPath(real, policy);
  if (!v.ok) return `mount point ${m.container_path}: its host path ${m.host_path} ${v.reason}`;
  return problem ? `mount point ${m.container_path}: its host path ${m.host_path} ${problem}` : null;
}

/** Every rule the container's record breaks now (empty when none). */
export async function violations(rec: ContainerRecord, policy: HostPathPolicy | null, allowPrivileged: boolean): Promise<Violation[]> {
  const out: Violation[] = [];
  if (rec.privileged && !allowPrivileged) {
    out.push({
      rule: 'lxc.allow_privileged',
      message: `container ${rec.lxcid} is privileged and ${PRIVILEGED_SETTING} is false (a privileged container is root on the host)`,
    });
  }
  if (policy) {
    for (const m of rec.mount_points) {
      const why = await mountViolation(m, policy);
      if (why) out.push(mountBroken(m, why));
    }
  }
  return out;
}

/** The violation of a mount point that breaks the rule for `why`. */
export function mountBroken(m: MountPoint, why: string): Violation {
  return { rule: 'mount_points', container_path: m.container_path, message: `${why}: ${MOUNT_RULE}` };
}
