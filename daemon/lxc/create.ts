/**
 * Making containers: create (a rootfs unpacked from an image) and clone (a
 * copy of a stopped container), with the lxcid each takes and the name
 * rules between containers. Both are synchronous and crash-safe: the intent
 * names what to remove if the daemon dies before the record is written.
 */
import crypto from 'node:crypto';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { LXC_MIN_DISK_BYTES } from '../../api/registry/lxc.js';
import type { PoolConfig } from '../config.js';
import type { NoteSink } from '../lib/caller.js';
import { actorOf } from '../lib/operator.js';
import { badRequest, conflict, notFound } from '../lib/errors.js';
import { checkNewMounts, privilegedRefused } from './containment.js';
import { NEEDS, type LxcContext } from './context.js';
import { IDMAP, type ImageRef } from './driver.js';
import type { ContainerRecord } from './model.js';
import { lxcNameOf, randomHwaddr } from './naming.js';
import { checkNetwork, networkFromCreate, writeGuestNetwork } from './network.js';

const SEED_PATH = 'etc/svc/seed';
const SEED_MAX_BYTES = 1024 * 1024;
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;
const ENV_MAX = 256;

/**
 * LXC's environment lines: one config line per variable, so a name is a
 * shell variable name and a value holds no line break (it would start a new
 * LXC key) or NUL.
 */
export function checkEnvironment(env: Record<string, string>, arg = 'environment'): Record<string, string> {
  const keys = Object.keys(env);
  if (keys.length > ENV_MAX) throw badRequest(`argument '${arg}' takes at most ${ENV_MAX} variables`);
  for (const k of keys) {
    if (!ENV_KEY.test(k)) throw badRequest(`argument '${arg}' has a variable name that is not [A-Za-z_][A-Za-z0-9_]*`);
    if (/[\n\r\0]/.test(env[k])) throw badRequest(`argument '${arg}' has a value with a newline or NUL byte`);
  }
  return { ...env };
}

export class Create {
  /** lxcids reserved by creates and clones in progress. */
  private readonly reserved = new Set<number>();

  constructor(private readonly ctx: LxcContext) {}

  async create(a: ArgsOf<'lxc_create'>, ctx: NoteSink & { caller?: { tokenName: string } }): Promise<ResultOf<'lxc_create'>> {
    const { ctx: c } = this;
    await c.require([...NEEDS.lifecycle, ...NEEDS.build]);
    if (a.template_storage_id) c.pool(a.template_storage_id, 'template_storage_id');
    const image = await c.driver.images.find(a.template, a.template_storage_id);
    if (!image) throw notFound(`image '${a.template}' not found${a.template_storage_id ? ` on storage '${a.template_storage_id}'` : ''} (see GET /lxc/images)`);
    const pool = c.pool(a.storage_id ?? c.settings.defaultStorage);
    const privileged = a.privileged ?? false;
    if (privileged && !c.settings.allowPrivileged) throw privilegedRefused(a.nesting ? "argument 'privileged' (with nesting)" : "argument 'privileged'");
    if (!privileged) await c.require([IDMAP]);
    const idmap = privileged ? null : (await c.driver.host()).idrange;
    const disk = a.disk_size_bytes || image.meta.disk_size_bytes || 0;
    if (disk > 0 && disk < LXC_MIN_DISK_BYTES)
      throw badRequest(
        `image '${a.template}' asks for a disk limit of ${disk} bytes, below the smallest (${LXC_MIN_DISK_BYTES}, 32 MiB): give disk_size_bytes`,
      );
    const linked = a.linked_clone ?? false;
    if (linked) {
      if (!(await c.driver.storage.isZfs(pool.path))) {
        throw badRequest(
          `argument 'linked_clone' needs a ZFS pool: storage '${pool.id}' is not on ZFS (a linked clone is a ZFS clone of the image's base dataset)`,
        );
      }
      if (image.storage_id !== pool.id)
        throw badRequest(
          `argument 'linked_clone' needs the image on the same ZFS pool: image '${a.template}' is on storage '${image.storage_id}', the rootfs would be on '${pool.id}'`,
        );
      await c.require(['zfs']);
    } else if (disk > 0) {
      await c.require(NEEDS.disk);
    }
    const net = networkFromCreate(c, a);
    await checkNetwork(c, net);
    const environment = checkEnvironment(a.environment ?? {});
    const mounts = await checkNewMounts(a.mount_points ?? [], await c.mountPolicy());
    if (a.seed_data !== undefined && Buffer.byteLength(a.seed_data) > SEED_MAX_BYTES) throw badRequest("argument 'seed_data' must be at most 1 MiB");

    const imgKey = `img:${image.storage_id}:${a.template}`;
    const busyImg = c.lock.busy(imgKey);
    if (busyImg) throw conflict(`image '${a.template}' on storage '${image.storage_id}' is busy: ${busyImg} in progress`);
    return c.lock.exclusive([`name:${a.name.toLowerCase()}`], 'create', async () => {
      await c.ensureNameFree(a.name);
      const lxcid = await this.allocateId(a.lxcid);
      const doneReading = c.readingImage(imgKey);
      try {
        return await c.lock.exclusive([`ct:${lxcid}`], 'create', async () => {
          const t = c.now();
          const rec: ContainerRecord = {
            lxcid,
            name: a.name,
            template: a.template,
            template_storage_id: image.storage_id,
            storage_id: pool.id,
            rootfs_kind: linked ? 'zfs' : disk > 0 ? 'loop' : 'dir',
            cpu_cores: a.cpu_cores || image.meta.min_cpu_cores || c.settings.defaultCpuCores,
            memory_mb: a.memory_mb || image.meta.min_memory_mb || c.settings.defaultMemoryMb,
            disk_size_bytes: disk,
            privileged,
            idmap,
            nesting: a.nesting ?? false,
            environment,
            network: net,
            autostart: a.autostart ?? false,
            mount_points: mounts,
            linked_clone: linked,
            rootfs_sync_pending: false,
            created_at: t,
            updated_at: t,
          };
          const p = c.driver.storage.containerPaths(pool.path, lxcid);
          const confDir = c.driver.tools.confDir(lxcNameOf(lxcid));
          if (linked) rec.zfs_dataset = `${await c.driver.zfs.datasetOf(pool.path)}/hostd-lxc/containers/${lxcid}`;
          await c.records.journalVia(c.states.committing(lxcid, 'created', actorOf(ctx))).run(
            `create:${lxcid}`,
            { op: 'create', lxcid, dir: p.dir, confDir, zfs_dataset: rec.zfs_dataset },
            async () => {
              await this.buildRootfs(rec, image, pool, a.seed_data);
              await c.writeConfig(rec);
              await c.pause('create.before_commit');
            },
            {
              commit: () => [c.records.putOp(rec)],
              rollback: async () => c.removeContainerFiles(p.dir, lxcid, rec.zfs_dataset),
            },
          );
          ctx.note({
            summary: `Created container ${lxcid} '${a.name}' from image '${a.template}'`,
            target: `lxc/${lxcid}`,
            metadata: { lxcid, template: a.template, storage_id: pool.id, privileged },
          });
          await c.pause('create.committed');
          return { container: c.view(rec, 'stopped') };
        });
      } finally {
        this.reserved.delete(lxcid);
        doneReading();
      }
    });
  }

  /** `POST /lxc/{id}/clone`: `{id}` is the new container's id (as for VMs), `source_lxcid` the stopped source. */
  async clone(a: ArgsOf<'lxc_clone'>, ctx: NoteSink & { caller?: { tokenName: string } }): Promise<ResultOf<'lxc_clone'>> {
    const { ctx: c } = this;
    await c.require([...NEEDS.lifecycle, 'setfacl']);
    return c.onContainer(a.source_lxcid, 'clone', async (src) => {
      if (a.id === src.lxcid) throw conflict(`lxcid ${a.id} is taken (by the source container itself); the path id names the new container`);
      if (src.privileged && !c.settings.allowPrivileged) throw privilegedRefused(`container ${src.lxcid} is privileged, and so would be its clone`);
      await c.refuseViolations(src, 'be cloned (the clone would carry its mount points)');
      const st = await c.state(src);
      if (st !== 'stopped') throw conflict(`container ${a.source_lxcid} is ${st}; a clone needs the source stopped`);
      return c.lock.exclusive([`name:${a.name.toLowerCase()}`], 'clone', async () => {
        await c.ensureNameFree(a.name);
        const lxcid = await this.allocateId(a.id);
        try {
          const pool = c.pool(src.storage_id);
          const sp = c.driver.storage.containerPaths(pool.path, src.lxcid);
          const np = c.driver.storage.containerPaths(pool.path, lxcid);
          const t = c.now();
          const rec: ContainerRecord = {
            ...structuredClone(src),
            lxcid,
            name: a.name,
            created_at: t,
            updated_at: t,
            // A ZFS clone's copy is a full copy: it no longer depends on the image.
            rootfs_kind: src.rootfs_kind === 'zfs' ? 'dir' : src.rootfs_kind,
            zfs_dataset: undefined,
            linked_clone: false,
            network: { ...src.network, ip_address: null, hwaddr: randomHwaddr(crypto.randomBytes(3)) },
            rootfs_sync_pending: true,
          };
          const confDir = c.driver.tools.confDir(lxcNameOf(lxcid));
          await c.records.journalVia(c.states.committing(lxcid, 'created', actorOf(ctx))).run(
            `create:${lxcid}`,
            { op: 'create', lxcid, dir: np.dir, confDir },
            async () => {
              await c.driver.storage.makeContainerDir(np.dir);
              if (src.rootfs_kind === 'loop') await c.driver.storage.copy(sp.img, np.img);
              else await c.driver.storage.copy(sp.rootfs, np.rootfs);
              await c.writeConfig(rec);
              await c.pause('clone.before_commit');
            },
            {
              commit: () => [c.records.putOp(rec)],
              rollback: async () => c.removeContainerFiles(np.dir, lxcid),
            },
          );
          ctx.note({
            summary: `Cloned container ${src.lxcid} '${src.name}' to ${lxcid} '${a.name}'`,
            target: `lxc/${lxcid}`,
            metadata: { source_lxcid: src.lxcid, lxcid },
          });
          await c.pause('clone.committed');
          return { container: c.view(rec, 'stopped') };
        } finally {
          this.reserved.delete(lxcid);
        }
      });
    });
  }

  /**
   * Picks a free lxcid and reserves it (the caller drops the reservation once
   * the record is written or the create failed). Allocations run one at a
   * time and copy the reservations before reading the records: a create that
   * commits (and drops its reservation) during the reads would otherwise be in
   * neither, and its lxcid handed out twice.
   */
  private allocateId(wanted: number | undefined): Promise<number> {
    const { ctx: c } = this;
    return c.lock.run(['lxcid-alloc'], async () => {
      // Only allocation adds reservations, so the copy covers every one that can exist until this returns.
      const held = new Set(this.reserved);
      const taken = new Set((await c.records.all()).map((r) => r.lxcid));
      const configDirs = new Set(await c.driver.tools.listConfigDirs());
      const free = (id: number) => !taken.has(id) && !held.has(id) && !configDirs.has(lxcNameOf(id));
      let id: number | undefined;
      if (wanted !== undefined) {
        if (!free(wanted)) throw conflict(`lxcid ${wanted} is taken`);
        id = wanted;
      } else {
        for (let i = c.settings.firstLxcid; i < 1_000_000_000 && id === undefined; i++) if (free(i)) id = i;
        if (id === undefined) throw conflict('no free lxcid left');
      }
      this.reserved.add(id);
      return id;
    });
  }

  private async buildRootfs(rec: ContainerRecord, image: ImageRef, pool: PoolConfig, seed: string | undefined): Promise<void> {
    const { driver } = this.ctx;
    const s = driver.storage;
    const p = s.containerPaths(pool.path, rec.lxcid);
    await s.preparePool(pool.path);
    await s.makeContainerDir(p.dir);
    if (rec.idmap) {
      await s.ensureTraversable(p.dir, rec.idmap.uid);
      await s.ensureTraversable(driver.tools.lxcPath, rec.idmap.uid);
    }
    const fill = async (root: string) => {
      await writeGuestNetwork(this.ctx, rec, root);
      if (seed !== undefined) await s.writeGuestFile(root, SEED_PATH, seed, 0o600, rec.idmap);
    };
    if (rec.rootfs_kind === 'zfs') {
      const baseDs = `${await driver.zfs.datasetOf(pool.path)}/hostd-lxc/images/${rec.template}`;
      const snap = `${baseDs}@base`;
      if (!(await driver.zfs.snapshotExists(snap))) {
        const mp = s.zfsImageMount(pool.path, rec.template);
        if (!(await driver.zfs.exists(baseDs))) await driver.zfs.create(baseDs, mp);
        await s.unpack(image.file, mp, rec.idmap);
        await driver.zfs.snapshot(snap);
      }
      await driver.zfs.clone(snap, rec.zfs_dataset!, p.rootfs, rec.disk_size_bytes);
      await fill(p.rootfs);
      return;
    }
    if (rec.rootfs_kind === 'loop') {
      await s.makeDiskImage(p.img, rec.disk_size_bytes, rec.idmap);
      await s.withRootfs(pool.path, { kind: 'loop', path: p.img }, false, async (root) => {
        await s.unpack(image.file, root, rec.idmap);
        await fill(root);
      });
      return;
    }
    await s.unpack(image.file, p.rootfs, rec.idmap);
    await fill(p.rootfs);
  }
}
