/**
 * Linked clones on ZFS pools: an image's rootfs is unpacked once into a base
 * dataset and snapshotted (`@base`); a linked container is a `zfs clone` of
 * that snapshot, mounted where its rootfs directory would be. The disk limit
 * of such a container is the clone's `refquota`.
 *
 * This host has no ZFS (RUNTIMES.md): this path is exercised where a pool is
 * on ZFS; elsewhere `linked_clone` is refused with a 400 before any of it runs.
 */
import { run } from '../../lib/run.js';
import { badRequest } from '../../lib/errors.js';
import type { ZfsOps } from '../driver.js';

const INSTALL = 'the zfsutils-linux package';

/** The dataset mounted at `mountpoint` (from `zfs list -H -o name,mountpoint` output). */
export function datasetAt(listing: string, mountpoint: string): string | null {
  for (const line of listing.split('\n')) {
    const [name, mp] = line.split('\t');
    if (name && mp === mountpoint) return name;
  }
  return null;
}

export class Zfs implements ZfsOps {
  async datasetOf(poolPath: string): Promise<string> {
    const r = await run('zfs', ['list', '-H', '-o', 'name,mountpoint', '-t', 'filesystem'], { timeoutMs: 30_000, install: INSTALL });
    const ds = datasetAt(r.stdout, poolPath);
    if (!ds) throw badRequest(`linked_clone needs the storage pool's directory to be a ZFS dataset's mountpoint (${poolPath} is not)`);
    return ds;
  }

  async exists(dataset: string): Promise<boolean> {
    const r = await run('zfs', ['list', '-H', '-o', 'name', dataset], { timeoutMs: 30_000, okCodes: [0, 1], install: INSTALL });
    return r.code === 0;
  }

  async snapshotExists(snap: string): Promise<boolean> {
    const r = await run('zfs', ['list', '-H', '-t', 'snapshot', '-o', 'name', snap], { timeoutMs: 30_000, okCodes: [0, 1], install: INSTALL });
    return r.code === 0;
  }

  async create(dataset: string, mountpoint: string): Promise<void> {
    await run('zfs', ['create', '-p', '-o', `mountpoint=${mountpoint}`, dataset], { timeoutMs: 60_000, install: INSTALL });
  }

  async snapshot(snap: string): Promise<void> {
    await run('zfs', ['snapshot', snap], { timeoutMs: 60_000, install: INSTALL });
  }

  async clone(snap: string, dataset: string, mountpoint: string, refquota: number): Promise<void> {
    const args = ['clone', '-p', '-o', `mountpoint=${mountpoint}`];
    if (refquota > 0) args.push('-o', `refquota=${refquota}`);
    await run('zfs', [...args, snap, dataset], { timeoutMs: 60_000, install: INSTALL });
  }

  async setRefquota(dataset: string, bytes: number): Promise<void> {
    await run('zfs', ['set', `refquota=${bytes > 0 ? bytes : 'none'}`, dataset], { timeoutMs: 60_000, install: INSTALL });
  }

  async destroy(dataset: string): Promise<void> {
    await run('zfs', ['destroy', '-r', dataset], { timeoutMs: 300_000, okCodes: [0, 1], install: INSTALL });
  }
}
