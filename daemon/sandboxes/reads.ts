/** What a token sees of its sandboxes: the list, one sandbox, a wait until running, and the images a sandbox can boot from. */
import type { Caller } from '../lib/caller.js';
import { O } from './driver.js';
import { isForkState, MAX_WAIT_MS, type SandboxContext, type SandboxView } from './context.js';

export class SandboxReads {
  constructor(private readonly c: SandboxContext) {}

  // ------------------------------------------------------------ reads

  async list(a: { labels?: Record<string, string>; include_destroyed?: boolean }, ctx: { caller: Caller }): Promise<{ sandboxes: SandboxView[] }> {
    const want = Object.entries(a.labels ?? {});
    const mine = (await this.c.records.all())
      .filter((r) => r.token_id === ctx.caller.tokenId)
      .filter((r) => a.include_destroyed || r.phase !== 'destroyed')
      .filter((r) => want.every(([k, v]) => Object.hasOwn(r.labels, k) && r.labels[k] === v))
      .sort((x, y) => x.created_at.localeCompare(y.created_at) || x.id.localeCompare(y.id));
    return { sandboxes: await Promise.all(mine.map((r) => this.c.view(r))) };
  }

  async get(id: string, ctx: { caller: Caller }): Promise<{ sandbox: SandboxView }> {
    return { sandbox: await this.c.view(await this.c.owned(id, ctx.caller)) };
  }

  /** POST /sandboxes/{id}/wait: until running, or the timeout; says which. Ends at once where running cannot come by itself. */
  async wait(id: string, timeoutSeconds: number | undefined, ctx: { caller: Caller }) {
    await this.c.owned(id, ctx.caller);
    const t0 = Date.now();
    const end = t0 + Math.min((timeoutSeconds ?? 120) * 1000, MAX_WAIT_MS);
    for (;;) {
      // Taken before the sandbox is read, so that a change meanwhile still wakes this wait.
      const next = this.c.nextChange(id);
      try {
        const r = await this.waitStep(id, t0, end);
        if (r) return r;
        // Woken by the sandbox's changes and state events; the poll is only a safety net (sandboxes.wait_poll_seconds).
        await next.wait(Math.min(Math.max(0, end - Date.now()), this.c.e.settings.waitPollMs));
      } finally {
        next.cancel();
      }
    }
  }

  /** One look of the wait: its answer, or null to wait on. */
  private async waitStep(id: string, t0: number, end: number) {
    const rec = await this.c.records.get(id);
    const v = await this.c.view(rec!);
    const out = (running: boolean, timedOut: boolean, reason: string | null) => ({
      sandbox: v,
      running,
      timed_out: timedOut,
      waited_ms: Date.now() - t0,
      reason,
    });
    if (v.state === 'running') return out(true, false, null);
    const busy = this.c.lock.busy(`sbx:${id}`);
    if (v.state === 'destroyed') return out(false, false, 'the sandbox is destroyed');
    if (v.state === 'destroying') return out(false, false, 'the sandbox is being destroyed');
    if (v.state === 'failed') return out(false, false, `the sandbox did not start: ${v.error}`);
    if ((v.state === 'suspended' || v.state === 'stopped') && !busy)
      return out(false, false, `the sandbox is ${v.state}: resume it (POST /sandboxes/${id}/resume)`);
    const left = end - Date.now();
    if (left <= 0) return out(false, true, `the sandbox is still ${v.state}`);
    return null;
  }

  /** GET /sandboxes/images: images and templates, each with its warm states and how a default create would start. */
  async images() {
    const imgs = (await this.c.vms.allImages()).sort((a, b) => a.image_id.localeCompare(b.image_id));
    const warm = (await this.c.vms.warmStates(O)).filter((w) => !isForkState(w));
    const out = [];
    for (const img of imgs) {
      const res = this.c.resources(img, null);
      const fit = await this.c.warmFor({ image_id: img.image_id, ...res });
      out.push({
        image_id: img.image_id,
        name: img.name,
        kind: img.kind,
        storage_id: img.storage_id,
        labels: img.labels,
        min_cpu_cores: img.min_cpu_cores,
        min_memory_mb: img.min_memory_mb,
        min_disk_gb: res.diskFloor,
        default_resources: { cpu_cores: res.cpu_cores, memory_mb: res.memory_mb, disk_gb: res.disk_gb },
        default_start: fit.id ? ('warm' as const) : ('cold' as const),
        warm_states: warm
          .filter((w) => w.image_id === img.image_id)
          .map((w) => ({
            warm_state_id: w.id,
            cpu_cores: w.cpu_cores,
            memory_mb: w.memory_mb,
            disk_gb: w.disk_size_gb,
            created_at: w.created_at,
            resumable: w.resumable,
            reason: w.reason,
          })),
      });
    }
    const s = this.c.e.settings;
    return { images: out, defaults: { cpu_cores: s.defaultCpuCores, memory_mb: s.defaultMemoryMb, disk_gb: s.defaultDiskGb } };
  }
}
