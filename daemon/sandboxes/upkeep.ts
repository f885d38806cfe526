/** The domain's upkeep: the operator's view and exec, the guests port, reconciling at start, pruning tombstones, and shutdown. */
import type { JournalOp } from '../lib/journal.js';
import type { SandboxIntent } from './records.js';
import { IntentRecovery } from '../lib/recovery.js';
import type { GuestInfo } from '../domain.js';
import { notFound } from '../lib/errors.js';
import { noNotes } from '../lib/caller.js';
import { O, SANDBOX_LABEL, WARM_BUILD_LABEL } from './driver.js';
import type { ForkResumes } from './fork-resumes.js';
import { ID, inSandboxTerms, isForkState, LIVE, now, type SandboxContext, SEED_NS, sleep } from './context.js';

export class SandboxUpkeep {
  constructor(
    private readonly c: SandboxContext,
    private readonly resumes: ForkResumes,
  ) {}

  // ------------------------------------------------------------ operator (admin socket)

  /** Every sandbox of every token (hostctl sandbox list). */
  async listAll(includeDestroyed: boolean) {
    const all = (await this.c.records.all()).filter((r) => includeDestroyed || r.phase !== 'destroyed');
    return { sandboxes: await Promise.all(all.map((r) => this.c.view(r))) };
  }

  /** A command in a running sandbox through its guest agent (hostctl sandbox exec). */
  async exec(id: string, command: string, timeoutSeconds: number | undefined) {
    const rec = ID.test(id) ? await this.c.records.get(id) : undefined;
    if (!rec) throw notFound(`sandbox '${id}' not found`);
    this.c.refuseUnready(rec, 'exec in');
    try {
      const { vmid: _v, ...r } = await this.c.vms.exec(rec.vmid!, command, timeoutSeconds, noNotes, O);
      void _v;
      return { id, ...r };
    } catch (err) {
      throw inSandboxTerms(err, rec);
    }
  }

  // ------------------------------------------------------------ ports

  /** The guests port: live sandboxes (and a warm build VM) with what they hold. */
  async guests(): Promise<GuestInfo[]> {
    const out: GuestInfo[] = [];
    for (const r of await this.c.records.all()) {
      if (!LIVE.has(r.phase)) continue;
      const g = r.vmid !== null ? await this.c.vms.guestInfo(r.vmid).catch(() => null) : null;
      out.push({
        kind: 'sandbox',
        id: r.id,
        name: r.name,
        state: r.phase === 'ready' ? (g?.state ?? 'failed') : r.phase,
        running: g?.running ?? false,
        cpu_cores: r.cpu_cores,
        memory_mb: r.memory_mb,
        addresses: g?.addresses ?? [],
      });
    }
    for (const v of await this.c.vms.listOwned(O.owner)) {
      if (v.labels[WARM_BUILD_LABEL] === undefined) continue;
      out.push({
        kind: 'sandbox',
        id: `warm-build-${v.vmid}`,
        name: v.name,
        state: v.state,
        running: v.state === 'running' || v.state === 'paused',
        cpu_cores: v.cpu_cores,
        memory_mb: v.memory_mb,
        addresses: [],
      });
    }
    return out;
  }

  // ------------------------------------------------------------ start-up and shutdown

  /**
   * An interrupted destroy, finished (IntentRecovery's settle, at open, after
   * the VM domain's own recovery): the tombstone is its outcome.
   */
  private async settleDestroy(i: SandboxIntent): Promise<JournalOp[]> {
    if (!(await this.c.records.get(i.id))) return [];
    return [this.c.records.put(await this.c.finishDestroy(i))];
  }

  /**
   * At open, before serving (after the VM domain's own recovery), through
   * IntentRecovery: finishes interrupted destroys, then continues interrupted
   * boots, marks sandboxes whose VM vanished, and removes VMs and seeds no
   * sandbox owns. Returns what it did.
   */
  async recover(): Promise<{ destroys: number; boots: number; orphans: number; lost: number }> {
    let found = { boots: 0, orphans: 0, lost: 0 };
    const report = await new IntentRecovery<SandboxIntent>({
      domain: 'sandboxes',
      journal: this.c.records.journal,
      log: this.c.e.log,
      settle: (_key, intent) => this.settleDestroy(intent),
      reconcile: async () => {
        found = await this.reconcile();
      },
      describe: (i) => ({ op: i.op, id: i.id }),
    }).run();
    return { destroys: report.settled, ...found };
  }

  /** After the intents: what they do not cover (boots under way, VMs that vanished, VMs and seeds no sandbox owns). */
  private async reconcile(): Promise<{ boots: number; orphans: number; lost: number }> {
    const log = this.c.e.log;
    let boots = 0;
    let lost = 0;
    const all = await this.c.records.all();
    const byId = new Map(all.map((r) => [r.id, r]));
    for (const r of all) {
      if (r.phase === 'destroying') {
        // Not reachable (the phase and the intent are one batch); finish it all the same.
        await this.c.records.write([this.c.records.put(await this.c.finishDestroy({ id: r.id, by: r.token_name, at: now() }))]);
      } else if (r.phase === 'ready' && !(await this.c.vmOf(r))) {
        lost++;
        await this.c.update(r.id, (x) => {
          x.phase = 'failed';
          x.error = `its VM ${x.vmid} was gone when hostd started`;
          x.vmid = null;
        });
      }
    }
    let orphans = 0;
    for (const v of await this.c.vms.listOwned(O.owner)) {
      const sid = v.labels[SANDBOX_LABEL];
      const r = sid === undefined ? undefined : byId.get(sid);
      const keep = r !== undefined && (r.phase === 'booting' || (r.phase === 'ready' && r.vmid === v.vmid));
      if (keep) continue;
      log.warn({ vmid: v.vmid, sandbox: sid ?? null, build: v.labels[WARM_BUILD_LABEL] ?? null }, 'sandboxes: removing a VM no sandbox owns');
      orphans++;
      await this.c.removeVm(v.vmid).catch((err) => log.error({ err, vmid: v.vmid }, 'sandboxes: removing an orphan VM failed'));
    }
    for (const name of await this.c.e.secrets.list(SEED_NS)) {
      if (byId.get(name)?.phase !== 'booting') await this.c.e.secrets.delete(SEED_NS, name);
    }
    // A fork's saved state no live sandbox rests on (its forks gone, or hostd stopped between the save and the records).
    for (const w of (await this.c.vms.warmStates(O)).filter(isForkState)) await this.c.releaseForkState(w.id);
    // A fork's copies resume through the fork queue, as they would have without the restart (oldest fork first); other boots begin at once.
    const booting = (await this.c.records.all()).filter((r) => r.phase === 'booting').sort((a, b) => a.created_at.localeCompare(b.created_at));
    const copies: string[] = [];
    for (const r of booting) {
      boots++;
      if (r.fork) copies.push(r.id);
      else this.c.startBoot(r.id);
    }
    this.resumes.add(copies);
    return { boots, orphans, lost };
  }

  /** Tombstones older than `tombstone_days` go, with their idempotency keys. */
  async prune(): Promise<number> {
    const cutoff = Date.now() - this.c.e.settings.tombstoneMs;
    const old = (await this.c.records.all()).filter((r) => r.phase === 'destroyed' && r.destroyed_at && Date.parse(r.destroyed_at) < cutoff);
    for (const r of old)
      await this.c.records.write([
        this.c.records.del(r.id),
        this.c.states.forget(r.id),
        ...(r.idempotency ? [this.c.records.delIdem(r.token_id, r.idempotency)] : []),
      ]);
    return old.length;
  }

  /** Boots under way stop (their VMs stay); the next start continues them. */
  async close(): Promise<void> {
    this.c.closed = true;
    this.c.unhearVms();
    this.resumes.close();
    const pending = [...this.c.boots.values()];
    for (const b of pending) b.ac.abort();
    await Promise.race([Promise.all(pending.map((b) => b.done)), sleep(10_000)]);
  }
}
