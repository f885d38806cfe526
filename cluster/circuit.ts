/**
 * Circuits for forwarded calls: while a member is known to be unreachable, a
 * call to it fails at once with a 502 instead of waiting its whole deadline.
 *
 * A member's circuit opens on evidence that it cannot answer: its health
 * probe failed, or a forwarded call failed for lack of it (the connection or
 * the call stream dropped, including by the keepalive ping's timeout, or the
 * deadline passed without a word from the member since the call was sent; a
 * deadline missed while the member kept answering other calls is a slow
 * operation, not a dead member). It closes at the first sign of life: a probe
 * or a forwarded call that got an answer.
 *
 * While the probe says the member is down, the probe is the only retry (it
 * runs every probe period with a 1 s deadline) and every call fails at once.
 * When calls opened the circuit and no probe has said anything since, one
 * call at a time is let through as a trial once the retry time has come (2 s
 * after opening, doubling up to 16 s while trials keep failing): the circuit
 * half-opens, so a member that answers again is used again even if probes lag.
 */

export const RETRY_FIRST_MS = 2000;
export const RETRY_MAX_MS = 16_000;

interface State {
  open: boolean;
  /** Why it opened (the probe's or the call's error), for the 502. */
  reason: string;
  since: number;
  retryAt: number;
  backoffMs: number;
  trial: boolean;
  /** The last failure was the health probe's: no trial calls until it answers. */
  probeSaysDown: boolean;
  /** Last time the member answered anything (probe or forwarded call). */
  heardAt: number;
}

export type Admission =
  | { go: true; trial: boolean }
  /** retryInMs: when a trial call will be let through; -1 while the probe says the member is down. */
  | { go: false; reason: string; since: string; retryInMs: number };

export class Circuits {
  private readonly states = new Map<string, State>();

  constructor(private readonly now: () => number = Date.now) {}

  private state(peerId: string): State {
    let s = this.states.get(peerId);
    if (!s)
      this.states.set(
        peerId,
        (s = { open: false, reason: '', since: 0, retryAt: 0, backoffMs: RETRY_FIRST_MS, trial: false, probeSaysDown: false, heardAt: 0 }),
      );
    return s;
  }

  /** May a call go to this member now? A refused one names why and since when. */
  admit(peerId: string): Admission {
    const s = this.states.get(peerId);
    if (!s || !s.open) return { go: true, trial: false };
    const t = this.now();
    if (!s.trial && !s.probeSaysDown && t >= s.retryAt) {
      s.trial = true;
      return { go: true, trial: true };
    }
    return { go: false, reason: s.reason, since: new Date(s.since).toISOString(), retryInMs: s.probeSaysDown ? -1 : Math.max(0, s.retryAt - t) };
  }

  /** The member answered (a probe, or a forwarded call with any outcome): the circuit closes. */
  answered(peerId: string): void {
    const s = this.state(peerId);
    s.open = false;
    s.trial = false;
    s.probeSaysDown = false;
    s.backoffMs = RETRY_FIRST_MS;
    s.heardAt = this.now();
  }

  /** Evidence that the member cannot answer: the circuit opens (or stays open, retrying later). */
  failed(peerId: string, reason: string, byProbe = false): void {
    const s = this.state(peerId);
    if (byProbe) s.probeSaysDown = true;
    const t = this.now();
    if (!s.open) {
      s.open = true;
      s.since = t;
      s.backoffMs = RETRY_FIRST_MS;
    } else if (s.trial) {
      s.backoffMs = Math.min(RETRY_MAX_MS, s.backoffMs * 2);
    }
    s.trial = false;
    s.reason = reason;
    s.retryAt = t + s.backoffMs;
  }

  /** A trial call ended without telling anything about the member (e.g. it was refused for another reason). */
  trialDone(peerId: string): void {
    const s = this.states.get(peerId);
    if (s) s.trial = false;
  }

  /** Whether the member has answered anything since `t` (epoch ms). */
  heardSince(peerId: string, t: number): boolean {
    return (this.states.get(peerId)?.heardAt ?? 0) >= t;
  }

  isOpen(peerId: string): boolean {
    return this.states.get(peerId)?.open ?? false;
  }

  forget(peerId: string): void {
    this.states.delete(peerId);
  }
}
