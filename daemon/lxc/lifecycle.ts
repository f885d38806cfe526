/**
 * Running containers: start, stop, restart, freeze and unfreeze (the state
 * table of docs/lxc.md). A container that breaks a rule now (privileged while
 * lxc.allow_privileged is off, a mount point the host-path rule refuses) is
 * never started, restarted or unfrozen (a start of a frozen one included); it
 * may be stopped. At a start, the mount points are
 * opened and judged by where their descriptors lead, and LXC mounts those
 * descriptors: a path swapped for a symlink after the check is never what
 * the container gets.
 */
import type { ResultOf } from '../../api/registry/index.js';
import type { NoteSink } from '../lib/caller.js';
import { conflict } from '../lib/errors.js';
import { judgeMount, mountBroken, type Violation } from './containment.js';
import { NEEDS, type LxcContext } from './context.js';
import type { ContainerRecord } from './model.js';
import { lxcNameOf } from './naming.js';
import { writeGuestNetwork } from './network.js';

type OneContainer = ResultOf<'lxc_start'>;

/** A call's sink, and who made the call (absent for the daemon's own, autostart). */
type CallSink = NoteSink & { caller?: { tokenName: string } };

export class Lifecycle {
  constructor(private readonly ctx: LxcContext) {}

  async start(lxcid: number, ctx: CallSink): Promise<OneContainer> {
    await this.ctx.require(NEEDS.lifecycle);
    return this.ctx.onContainer(lxcid, 'start', async (rec) => {
      const name = lxcNameOf(lxcid);
      const fast = this.ctx.driver.cgroups.fastState(name);
      if (fast === 'RUNNING') return { container: this.ctx.view(rec, 'running') };
      if (fast === 'FROZEN') {
        // Unfreezing lets it run again: the rules hold for that as for a start.
        await this.ctx.refuseViolations(rec, 'start');
        await this.ctx.driver.tools.unfreeze(name);
        ctx.note({ summary: `Started container ${lxcid} '${rec.name}' (it was frozen: unfrozen)`, target: `lxc/${lxcid}` });
        await this.ctx.states.changed(lxcid, 'RUNNING', ctx);
        return { container: this.ctx.view(rec, 'running') };
      }
      const r = await this.prepareAndStart(rec, 'start', true);
      if (r.started) ctx.note({ summary: `Started container ${lxcid} '${r.rec.name}'`, target: `lxc/${lxcid}` });
      await this.ctx.states.changed(lxcid, 'RUNNING', ctx);
      return { container: this.ctx.view(r.rec, 'running') };
    });
  }

  async stop(lxcid: number, ctx: CallSink): Promise<OneContainer> {
    await this.ctx.require(NEEDS.lifecycle);
    return this.ctx.onContainer(lxcid, 'stop', async (rec) => {
      await this.stopNow(rec);
      ctx.note({ summary: `Stopped container ${lxcid} '${rec.name}'`, target: `lxc/${lxcid}` });
      await this.ctx.states.changed(lxcid, 'STOPPED', ctx);
      return { container: this.ctx.view(rec, 'stopped') };
    });
  }

  async restart(lxcid: number, ctx: CallSink): Promise<OneContainer> {
    await this.ctx.require(NEEDS.lifecycle);
    return this.ctx.onContainer(lxcid, 'restart', async (rec) => {
      // Refused before the stop: a restart that cannot start again must not stop the container either.
      await this.ctx.refuseViolations(rec, 'restart');
      await this.stopNow(rec);
      // A restart passes through stopped: a follower sees both, as it would see the two calls.
      await this.ctx.states.changed(lxcid, 'STOPPED', ctx);
      const r = await this.prepareAndStart(rec, 'restart', false);
      ctx.note({ summary: `Restarted container ${lxcid} '${r.rec.name}'`, target: `lxc/${lxcid}` });
      await this.ctx.states.changed(lxcid, 'RUNNING', ctx);
      return { container: this.ctx.view(r.rec, 'running') };
    });
  }

  async freeze(lxcid: number, ctx: CallSink): Promise<OneContainer> {
    await this.ctx.require(NEEDS.lifecycle);
    return this.ctx.onContainer(lxcid, 'freeze', async (rec) => {
      const st = await this.ctx.state(rec);
      if (st === 'frozen') return { container: this.ctx.view(rec, 'frozen') };
      if (st !== 'running') throw conflict(`container ${lxcid} is ${st}; only a running container can be frozen`);
      await this.ctx.driver.tools.freeze(lxcNameOf(lxcid));
      ctx.note({ summary: `Froze container ${lxcid} '${rec.name}'`, target: `lxc/${lxcid}` });
      await this.ctx.states.changed(lxcid, 'FROZEN', ctx);
      return { container: this.ctx.view(rec, 'frozen') };
    });
  }

  async unfreeze(lxcid: number, ctx: CallSink): Promise<OneContainer> {
    await this.ctx.require(NEEDS.lifecycle);
    return this.ctx.onContainer(lxcid, 'unfreeze', async (rec) => {
      const st = await this.ctx.state(rec);
      if (st !== 'frozen') throw conflict(`container ${lxcid} is not frozen (it is ${st})`);
      // Thawed, it runs again: the same rules as for a start (a frozen container may still be stopped).
      await this.ctx.refuseViolations(rec, 'unfreeze');
      await this.ctx.driver.tools.unfreeze(lxcNameOf(lxcid));
      ctx.note({ summary: `Unfroze container ${lxcid} '${rec.name}'`, target: `lxc/${lxcid}` });
      await this.ctx.states.changed(lxcid, 'RUNNING', ctx);
      return { container: this.ctx.view(rec, 'running') };
    });
  }

  /** Stops the container; 'stopped' means its disk image is released too (the kernel detaches it a moment later). */
  async stopNow(rec: ContainerRecord): Promise<void> {
    const name = lxcNameOf(rec.lxcid);
    const st = await this.ctx.driver.tools.state(name);
    if (st === 'STOPPED') return;
    // Frozen tasks cannot act on the halt signal (or even die): thaw first.
    if (st === 'FROZEN' || st === 'FREEZING') await this.ctx.driver.tools.unfreeze(name);
    await this.ctx.driver.tools.stop(name, this.ctx.settings.stopTimeoutSeconds);
    if (rec.rootfs_kind === 'loop') await this.ctx.driver.storage.waitImageFree(this.ctx.paths(rec).img);
  }

  /**
   * Checks the rules, the bridge, writes pending guest files and the config,
   * then starts with the mount points pinned. Answers the record as it is
   * now, and whether this call started it: with `idempotent`, a container
   * found running after a failed lxc-start (started meanwhile by someone
   * else, or running where the cgroup files did not say) is no error.
   */
  private async prepareAndStart(recIn: ContainerRecord, what: string, idempotent: boolean): Promise<{ rec: ContainerRecord; started: boolean }> {
    const { ctx: c } = this;
    let rec = recIn;
    await c.refuseViolations(rec, what);
    await c.hold('start.checked');
    const br = c.effectiveBridge(rec.network);
    if (rec.network.type === 'bridged') {
      if (!br) throw conflict(`container ${rec.lxcid} is bridged to the default bridge, and lxc.default_bridge is not set`);
      if (!(await c.driver.bridgeExists(br))) throw conflict(`bridge '${br}' of container ${rec.lxcid} does not exist on this host`);
    }
    if (rec.idmap) {
      await c.driver.storage.ensureTraversable(c.paths(rec).dir, rec.idmap.uid);
      await c.driver.storage.ensureTraversable(c.driver.tools.lxcPath, rec.idmap.uid);
    }
    if (rec.rootfs_sync_pending) {
      const r = rec;
      await c.withRootfs(r, false, (root) => writeGuestNetwork(c, r, root));
      rec = { ...rec, rootfs_sync_pending: false };
      await c.records.put(rec);
    }
    await c.writeConfig(rec);
    const name = lxcNameOf(rec.lxcid);
    const pinned = await c.driver.mounts.pin(name, rec.mount_points);
    try {
      if (pinned.pins.length) {
        const policy = await c.mountPolicy();
        const broken: Violation[] = [];
        for (const p of pinned.pins) {
          const why = judgeMount(p.mount, p.real, p.problem, policy);
          if (why) broken.push(mountBroken(p.mount, why));
        }
        if (broken.length) throw c.refusal(rec, what, broken);
      }
      await c.hold('start.pinned');
      await pinned.stage();
      try {
        await c.driver.tools.start(name);
      } catch (err) {
        if (idempotent && (await c.driver.tools.state(name)) === 'RUNNING') return { rec, started: false };
        throw err;
      }
    } finally {
      await pinned.release();
    }
    return { rec, started: true };
  }
}
