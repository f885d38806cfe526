/**
 * The `proxy.state` events of this node: `serving`, `stopped` (with why:
 * `disabled`, `not-holder`, `lease-lost`) and `degraded` (the proxy should
 * serve here but cannot: Caddy exited, Caddy is missing or failed to start,
 * a listener or configuration was refused), reported by the data plane after
 * each reconcile and at once when Caddy exits on its own.
 *
 * The last state reported is stored (`proxy-state` key `reported`) in the
 * event's own batch (`writeWithState`): a start compares the first
 * reconcile's state with it, so a change that happened while the daemon was
 * down (Caddy removed, the lease moved) is reported once, a restart that
 * changed nothing reports nothing, and a crash never leaves the mark without
 * its event (which would lose the event) nor the event without its mark
 * (which would repeat it).
 */
import type { EventsPort } from '../domain.js';
import { writeWithState } from '../events/state.js';
import { OPERATOR } from '../lib/operator.js';
import { SerialQueue } from '../lib/serial.js';
import type { ProxyContext } from './context.js';

export type ProxyStateWord = 'serving' | 'stopped' | 'degraded';

export interface ProxyState {
  state: ProxyStateWord;
  /** What a client needs beside it; `reason` for `stopped` and `degraded`. */
  data: Record<string, unknown> & { reason?: string };
}

const KEY = 'reported';

/** Two states are the same change when their word and reason are. */
const same = (a: { state: string; reason?: string } | null, b: ProxyState): boolean =>
  a !== null && a.state === b.state && (a.reason ?? null) === (b.data.reason ?? null);

export class StateReports {
  private last: { state: ProxyStateWord; reason?: string } | null = null;
  private readonly queue = new SerialQueue();

  constructor(
    private readonly ctx: ProxyContext,
    private readonly events: EventsPort,
  ) {}

  /** Loads what was reported before the last stop. */
  async open(): Promise<void> {
    this.last = ((await this.ctx.records.state.get(KEY)) as { state: ProxyStateWord; reason?: string } | undefined) ?? null;
  }

  /**
   * Whether a `stopped` now means the lease went elsewhere: this node last
   * served (or should have), or already said it lost the lease (the reason
   * stays until it serves again or the proxy is disabled).
   */
  lostLease(): boolean {
    return this.last !== null && (this.last.state !== 'stopped' || this.last.reason === 'lease-lost');
  }

  /**
   * Reports `s` when it differs from the last state reported: the mark and
   * the event in one batch. One at a time, in call order.
   */
  report(s: ProxyState, actor: string = OPERATOR): Promise<void> {
    return this.queue
      .run(async () => {
        if (same(this.last, s)) return;
        const mark = s.data.reason === undefined ? { state: s.state } : { state: s.state, reason: s.data.reason };
        const why = s.data.reason ? ` (${s.data.reason})` : '';
        await writeWithState(this.events, this.ctx.records.store, [{ type: 'put', sub: this.ctx.records.state, key: KEY, value: mark }], {
          domain: 'proxy',
          resource: 'proxy',
          state: s.state,
          data: s.data,
          actor,
          summary: `proxy on ${this.ctx.node.name} is ${s.state}${why}`,
        });
        this.last = mark;
        await this.ctx.pause('state.marked');
      })
      .catch((err) => this.ctx.log.warn({ err, state: s.state }, 'proxy: state event not written'));
  }
}
