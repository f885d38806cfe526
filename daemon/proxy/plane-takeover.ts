/**
 * Takeover: on a member that does not hold the lease, a holder that the
 * cluster's probes report unreachable is taken over, after
 * `proxy.takeover_grace_ms` plus a second per rank (members sorted by id,
 * the holder left out), so that members do not duel for it. A takeover,
 * automatic or asked for (POST /proxy/move without peer_id), is an incident
 * on the new holder.
 */
import type { LeaseView, PeerInfo } from '../domain.js';
import { errorBody } from '../lib/errors.js';
import type { ProxyContext } from './context.js';
import type { Incidents } from './incidents.js';

export class HolderWatch {
  private unreachableSince: number | null = null;
  private inFlight = false;

  constructor(
    private readonly ctx: ProxyContext,
    private readonly incidents: Incidents,
    /** Reconciles soon (the data plane's kick). */
    private readonly kick: () => void,
  ) {}

  /** One look at the holder, with the peers as the cluster's probes see them now. */
  async watch(peers: PeerInfo[]): Promise<void> {
    const { ctx } = this;
    const s = ctx.lease();
    const members = ctx.cluster.members();
    if (!ctx.config().config.enabled || !ctx.settings.autoTakeover || members.length <= 1 || s.holding || s.holder === null) {
      this.unreachableSince = null;
      return;
    }
    const holder = peers.find((p) => p.peer_id === s.holder);
    if (!holder || holder.reachable) {
      this.unreachableSince = null;
      return;
    }
    const now = Date.now();
    this.unreachableSince ??= now;
    const candidates = peers
      .filter((p) => p.reachable && p.peer_id !== s.holder)
      .map((p) => p.peer_id)
      .sort();
    const rank = Math.max(0, candidates.indexOf(ctx.node.id));
    if (now - this.unreachableSince < ctx.settings.takeoverGraceMs + rank * 1000 || this.inFlight) return;
    this.inFlight = true;
    const since = this.unreachableSince;
    try {
      const r = await ctx.cluster.lease.takeover();
      if (r.holding) {
        ctx.log.warn({ previous: s.holder, epoch: r.epoch }, 'proxy taken over: the holder was unreachable');
        await this.noteTakeover(s.holder, r, { automatic: true, unreachable_for_ms: Date.now() - since });
      }
    } catch (err) {
      ctx.log.info({ err: errorBody(err).body.error }, 'proxy takeover not done');
    } finally {
      this.inFlight = false;
    }
  }

  /** Records a takeover (automatic, or through POST /proxy/move without peer_id). */
  async noteTakeover(previous: string | null, now: LeaseView, details: Record<string, unknown>): Promise<void> {
    await this.incidents.capture('takeover', `Proxy taken over by ${this.ctx.node.id} at epoch ${now.epoch} from ${previous ?? 'nobody'}`, {
      previous_holder: previous,
      ...details,
    });
    this.kick();
  }
}
