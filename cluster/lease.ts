/**
 * The proxy-holder lease: which cluster member serves the reverse proxy.
 *
 * Every node keeps, in the `lease` sublevel of its store:
 *   - `record`:   the highest lease record it KNOWS to be committed, `{holder, epoch}`;
 *   - `acceptor`: its acceptor state for the protocol below, `{promised, promised_by, accepted}`.
 *
 * A move (explicit target) or a takeover (this node, only when the recorded holder is
 * unreachable) is a proposal of a new epoch with a new holder, run as single-decree
 * Paxos in which the epoch is the ballot:
 *
 *   phase 1  prepare(e, P)     an acceptor promises e to proposer P only when e is higher than
 *                              every epoch it has promised, accepted or knows committed; the
 *                              promise is stored durably before the reply. Replies carry the
 *                              acceptor's committed record and highest accepted proposal.
 *   phase 2  accept(e, h, P)   an acceptor accepts only if it promised exactly e to P and has
 *                              accepted nothing at e or above; stored durably before the reply.
 *   commit                     once a majority of ALL members (the proposer included) accepted
 *                              (e, h), the proposer stores {holder: h, epoch: e} as committed and
 *                              tells everyone. Without a majority it answers 503 and stores nothing
 *                              as committed: the change does not take effect anywhere.
 *
 * Why no epoch can have two holders, whatever the interleaving, message loss or partition:
 *   1. An acceptor's accepted epoch strictly increases and is durable, so each node accepts at
 *      most one (holder) per epoch, ever (also across restarts).
 *   2. A record is committed only after a majority accepted (e, h). Two majorities of the same
 *      member set intersect, so if (e, h1) and (e, h2) were both committed, some node accepted
 *      two values at epoch e, contradicting 1. (Phase 1 additionally gives each epoch a single
 *      proposer: a node promises e to at most one proposer and accept requires that promise.)
 *   3. A committed record only travels as a fact (commit messages, the `record` every message
 *      and reply carries, sync); nodes never invent one, so every node's `record` is a committed
 *      (e, h) and `holding` (record.holder === self) can never be true on two nodes at one epoch.
 *   4. A node that learns of a higher committed epoch stops holding synchronously (the `fence`),
 *      before the new record is even written, and fires onChange.
 *
 * The member set comes from the transport (`link.members()`); the majority is computed over
 * it at proposal time. Membership changes are not part of this protocol: change membership one
 * member at a time and let it reach every node before moving the lease (docs/failover.md).
 */
import { SerialQueue } from '../daemon/lib/serial.js';
import { Periodic } from '../daemon/lib/periodic.js';
import type { Logger } from 'pino';
import type { Store, Sub } from '../daemon/store/store.js';
import { badRequest, conflict, forbidden, notFound, unavailable } from '../daemon/lib/errors.js';

/** What the cluster transport gives the lease and the proxy-config replication. */
export interface LeasePeerLink {
  selfId: string;
  members(): string[]; // all current member ids, including self
  send(peerId: string, msg: unknown): Promise<unknown>; // delivers msg to that member's LeaseManager.handle(), resolves with its reply; rejects when unreachable or past a deadline
  sendProxyConfig(peerId: string, msg: unknown): Promise<unknown>; // delivers to that member's replicated configuration (ReplicatedConfig.handle)
  isReachable(peerId: string): Promise<boolean>; // quick health probe
}

/** A committed lease record. `holder` is null only before the cluster exists (epoch 0). */
export interface LeaseRecord {
  holder: string | null;
  epoch: number;
}

export interface LeaseState {
  holder: string | null;
  epoch: number;
  /** True only on the holder of a record this node knows a majority committed, and no higher epoch is known. */
  holding: boolean;
}

/** A proposal an acceptor has accepted (it may or may not have been committed). */
export interface AcceptedProposal {
  epoch: number;
  holder: string;
  by: string;
}

interface AcceptorState {
  promised: number;
  promised_by: string | null;
  accepted: AcceptedProposal | null;
}

/** Messages between LeaseManagers. Each carries the sender's committed record so the receiver learns of higher epochs. */
export type LeaseMessage =
  | { type: 'prepare'; from: string; epoch: number; record: LeaseRecord }
  | { type: 'accept'; from: string; epoch: number; holder: string; record: LeaseRecord }
  | { type: 'commit'; from: string; record: LeaseRecord }
  | { type: 'sync'; from: string; record: LeaseRecord };

/** Every reply: whether the request was granted, and the replier's committed record and acceptor state. */
export interface LeaseReply {
  ok: boolean;
  from: string;
  record: LeaseRecord;
  promised: number;
  accepted: AcceptedProposal | null;
}

/** How often start() runs sync(). */
export const LEASE_SYNC_INTERVAL_MS = 2000;
/** Attempts of a proposal when a majority answered but some refused because of a competing proposer. */
const MAX_ATTEMPTS = 5;

const RECORD_KEY = 'record';
const ACCEPTOR_KEY = 'acceptor';

export function noMajorityMessage(stored: number, members: number, epoch: number): string {
  return `no majority: only ${stored} of ${members} members stored epoch ${epoch}`;
}

export function holderReachableMessage(holder: string): string {
  return `the proxy holder ${holder} is reachable; move it with peer_id instead`;
}

// ---------------------------------------------------------------------------
// Shape checks for everything that crosses the wire or the store.

const isObj = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isId = (value: unknown): value is string => typeof value === 'string' && value.length > 0 && value.length <= 256;
const isEpoch = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;

function parseRecord(value: unknown, what: string): LeaseRecord {
  if (!isObj(value)) throw badRequest(`${what} must be an object {holder, epoch}`);
  const { holder, epoch } = value;
  if (!isEpoch(epoch)) throw badRequest(`${what}.epoch must be a non-negative integer`);
  if (epoch === 0) {
    if (holder !== null && holder !== undefined) throw badRequest(`${what}.holder must be null at epoch 0`);
    return { holder: null, epoch: 0 };
  }
  if (!isId(holder)) throw badRequest(`${what}.holder must be a member id`);
  return { holder, epoch };
}

function parseAccepted(value: unknown, what: string): AcceptedProposal | null {
  if (value === null || value === undefined) return null;
  if (!isObj(value) || !isEpoch(value.epoch) || value.epoch < 1 || !isId(value.holder) || !isId(value.by)) {
    throw badRequest(`${what} must be null or {epoch, holder, by}`);
  }
  return { epoch: value.epoch, holder: value.holder, by: value.by };
}

/** Validates an incoming protocol message; throws 400 naming what is wrong. */
export function parseLeaseMessage(msg: unknown): LeaseMessage {
  if (!isObj(msg)) throw badRequest('lease message must be an object');
  const { type, from } = msg;
  if (!isId(from)) throw badRequest('lease message needs `from`, the sender member id');
  const record = parseRecord(msg.record, 'record');
  switch (type) {
    case 'prepare': {
      if (!isEpoch(msg.epoch) || msg.epoch < 1) throw badRequest('prepare needs a positive integer `epoch`');
      return { type, from, epoch: msg.epoch, record };
    }
    case 'accept': {
      if (!isEpoch(msg.epoch) || msg.epoch < 1) throw badRequest('accept needs a positive integer `epoch`');
      if (!isId(msg.holder)) throw badRequest('accept needs `holder`, a member id');
      return { type, from, epoch: msg.epoch, holder: msg.holder, record };
    }
    case 'commit': {
      if (record.holder === null) throw badRequest('commit needs a record with a holder');
      return { type, from, record };
    }
    case 'sync':
      return { type, from, record };
    default:
      throw badRequest(`unknown lease message type ${JSON.stringify(type)}`);
  }
}

/** Validates a reply from a peer. */
export function parseLeaseReply(value: unknown): LeaseReply {
  if (!isObj(value)) throw badRequest('lease reply must be an object');
  if (typeof value.ok !== 'boolean') throw badRequest('lease reply needs boolean `ok`');
  if (!isId(value.from)) throw badRequest('lease reply needs `from`');
  if (!isEpoch(value.promised)) throw badRequest('lease reply needs integer `promised`');
  return {
    ok: value.ok,
    from: value.from,
    record: parseRecord(value.record, 'reply.record'),
    promised: value.promised,
    accepted: parseAccepted(value.accepted, 'reply.accepted'),
  };
}

// ---------------------------------------------------------------------------

interface Gathered {
  /** Members that granted the request (durably stored the promise / the accepted proposal). */
  ok: number;
  /** Members that answered but refused (they had promised or accepted a higher epoch). */
  refused: number;
  replies: LeaseReply[];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class LeaseManager {
  private readonly sub: Sub<unknown>;
  private readonly selfId: string;
  private record: LeaseRecord = { holder: null, epoch: 0 };
  private acceptor: AcceptorState = { promised: 0, promised_by: null, accepted: null };
  /** Highest committed epoch heard of; holding requires record.epoch >= fence. Raised synchronously on receipt. */
  private fence = 0;
  /** Highest epoch seen anywhere (promises and accepts included), to pick the next proposal's epoch. */
  private maxSeen = 0;
  /** State changes, one at a time (acceptor writes and record adoption). */
  private readonly changes = new SerialQueue();
  /** Proposals from this node, one at a time. */
  private readonly proposals = new SerialQueue();
  private readonly listeners = new Set<(state: LeaseState) => void>();
  private lastEmitted: LeaseState | null = null;
  private readonly periodic = new Periodic(
    () => this.sync(),
    (err) => this.log.debug({ err }, 'lease sync failed'),
  );

  constructor(
    private readonly store: Store,
    private readonly link: LeasePeerLink,
    private readonly log: Logger,
  ) {
    this.sub = store.sub<unknown>('lease');
    this.selfId = link.selfId;
  }

  /** Loads the record and acceptor state from the store. Call once before anything else. */
  async init(): Promise<void> {
    const rec = await this.sub.get(RECORD_KEY);
    if (rec !== undefined) this.record = parseRecord(rec, 'stored lease record');
    const acc = await this.sub.get(ACCEPTOR_KEY);
    if (acc !== undefined && isObj(acc)) {
      this.acceptor = {
        promised: isEpoch(acc.promised) ? acc.promised : 0,
        promised_by: isId(acc.promised_by) ? acc.promised_by : null,
        accepted: parseAccepted(acc.accepted, 'stored accepted proposal'),
      };
    }
    this.maxSeen = Math.max(this.maxSeen, this.highestLocalEpoch());
    this.lastEmitted = this.state();
  }

  /** Runs sync() now and then every `intervalMs`. */
  start(intervalMs = LEASE_SYNC_INTERVAL_MS): void {
    this.periodic.start(intervalMs);
  }

  stop(): void {
    this.periodic.stop();
  }

  state(): LeaseState {
    const { holder, epoch } = this.record;
    return { holder, epoch, holding: holder !== null && holder === this.selfId && epoch >= this.fence };
  }

  /** Subscribes to changes of holder, epoch or holding. Returns an unsubscribe function. */
  onChange(cb: (state: LeaseState) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** `cluster init`: a one-member cluster, this node holds at epoch 1. */
  async initialize(selfId: string): Promise<LeaseState> {
    if (selfId !== this.selfId) throw badRequest(`initialize(${selfId}) on node ${this.selfId}`);
    return this.changes.run(async () => {
      if (this.record.epoch > 0) {
        if (this.record.holder === selfId) return this.state();
        throw conflict(`the lease is already initialized (holder ${this.record.holder}, epoch ${this.record.epoch})`);
      }
      const record = { holder: selfId, epoch: 1 };
      const acceptor: AcceptorState = { promised: 1, promised_by: selfId, accepted: { epoch: 1, holder: selfId, by: selfId } };
      await this.store.batch([
        { type: 'put', sub: this.sub, key: RECORD_KEY, value: record },
        { type: 'put', sub: this.sub, key: ACCEPTOR_KEY, value: acceptor },
      ]);
      this.record = record;
      this.acceptor = acceptor;
      this.maxSeen = Math.max(this.maxSeen, 1);
      this.log.info({ holder: selfId, epoch: 1 }, 'proxy lease initialized');
      this.emit();
      return this.state();
    });
  }

  /** A joining node takes the committed record from the join reply (kept only if higher than its own). */
  async adopt(record: unknown): Promise<LeaseState> {
    await this.learnRecord(parseRecord(record, 'record'));
    return this.state();
  }

  /** Incoming protocol message from a member (or from this node itself). */
  async handle(msg: unknown): Promise<unknown> {
    const m = parseLeaseMessage(msg);
    if (m.from !== this.selfId && !this.link.members().includes(m.from)) {
      throw forbidden(`lease message from ${m.from}, which is not a cluster member`);
    }
    this.noteCommitted(m.record);
    return this.changes.run(async () => {
      await this.adoptLocked(m.record);
      let ok = true;
      switch (m.type) {
        case 'prepare':
          ok = await this.onPrepare(m.epoch, m.from);
          break;
        case 'accept':
          ok = await this.onAccept(m.epoch, m.holder, m.from);
          break;
        case 'commit':
        case 'sync':
          break; // the record was adopted above
      }
      return this.reply(ok);
    });
  }

  /** Asks every member for its record and adopts the highest committed one. */
  async sync(): Promise<LeaseState> {
    const msg: LeaseMessage = { type: 'sync', from: this.selfId, record: this.record };
    await Promise.allSettled(
      this.others().map(async (peer) => {
        const reply = parseLeaseReply(await this.link.send(peer, msg));
        await this.learn(reply);
      }),
    );
    return this.state();
  }

  /** Moves the proxy role to `targetPeerId` (any member, this node included). */
  async move(targetPeerId: string): Promise<LeaseState> {
    if (!this.memberIds().includes(targetPeerId)) throw notFound(`no cluster member '${targetPeerId}'`);
    return this.proposals.run(async () => {
      if (targetPeerId !== this.selfId && !(await this.reachable(targetPeerId))) {
        throw unavailable(`member ${targetPeerId} is unreachable; the proxy was not moved`);
      }
      return this.propose(targetPeerId, 'move');
    });
  }

  /** Takes the proxy role over on this node; only when the recorded holder is unreachable. */
  async takeover(): Promise<LeaseState> {
    return this.proposals.run(() => this.propose(this.selfId, 'takeover'));
  }

  // -------------------------------------------------------------------------
  // Proposer

  private async propose(holder: string, kind: 'move' | 'takeover'): Promise<LeaseState> {
    const startEpoch = this.record.epoch;
    for (let attempt = 1; ; attempt++) {
      if (kind === 'takeover') {
        if (this.state().holding) return this.state();
        await this.checkRecordedHolder();
      } else if (this.record.epoch > startEpoch && this.record.holder === holder) {
        return this.state(); // a competing proposal already made the target the holder
      }

      const members = this.memberIds();
      const n = members.length;
      const need = Math.floor(n / 2) + 1;
      const epoch = Math.max(this.maxSeen, this.highestLocalEpoch()) + 1;

      const p1 = await this.gather(members, need, { type: 'prepare', from: this.selfId, epoch, record: this.record });
      if (p1.ok < need) {
        if (p1.ok + p1.refused >= need && attempt < MAX_ATTEMPTS) {
          await this.backoff(attempt);
          continue;
        }
        this.log.warn({ epoch, holder, promised: p1.ok, members: n }, 'proxy lease proposal without a majority');
        throw unavailable(noMajorityMessage(p1.ok, n, epoch));
      }

      if (kind === 'takeover') {
        if (this.state().holding) return this.state();
        await this.checkRecordedHolder();
        await this.checkPendingHolders(p1.replies);
      } else if (this.record.epoch > startEpoch && this.record.holder === holder) {
        return this.state();
      }

      const p2 = await this.gather(members, need, { type: 'accept', from: this.selfId, epoch, holder, record: this.record });
      if (p2.ok < need) {
        if (p2.ok + p2.refused >= need && attempt < MAX_ATTEMPTS) {
          await this.backoff(attempt);
          continue;
        }
        this.log.warn({ epoch, holder, stored: p2.ok, members: n }, 'proxy lease proposal without a majority');
        throw unavailable(noMajorityMessage(p2.ok, n, epoch));
      }

      // A majority durably accepted (epoch, holder): it is committed.
      const record: LeaseRecord = { holder, epoch };
      await this.learnRecord(record);
      this.log.info({ holder, epoch, kind }, 'proxy lease committed');
      const commit: LeaseMessage = { type: 'commit', from: this.selfId, record };
      const sends = new Map<string, Promise<void>>();
      for (const peer of this.others()) {
        sends.set(
          peer,
          this.link
            .send(peer, commit)
            .then((r) => this.learn(parseLeaseReply(r)))
            .catch((err) => this.log.debug({ err, peer }, 'lease commit not delivered; the peer catches up by sync')),
        );
      }
      // Wait for the new holder to hear it (bounded by the link's deadline); the others learn in the background.
      await sends.get(holder);
      return this.state();
    }
  }

  /** 409 when the recorded holder is another member that is reachable. */
  private async checkRecordedHolder(): Promise<void> {
    const holder = this.record.holder;
    if (holder !== null && holder !== this.selfId && (await this.reachable(holder))) {
      throw conflict(holderReachableMessage(holder));
    }
  }

  /**
   * Proposals accepted above the highest committed record we know may have been committed
   * without us hearing of it yet. If their holder is reachable and says it holds, it is the
   * recorded holder: 409. (A holder only holds once it knows of the commit.)
   */
  private async checkPendingHolders(replies: LeaseReply[]): Promise<void> {
    const pending = new Set<string>();
    for (const r of replies) {
      if (r.accepted && r.accepted.epoch > this.record.epoch && r.accepted.holder !== this.selfId) pending.add(r.accepted.holder);
    }
    for (const peer of pending) {
      try {
        const reply = parseLeaseReply(await this.link.send(peer, { type: 'sync', from: this.selfId, record: this.record }));
        await this.learn(reply);
      } catch {}
    }
    if (this.state().holding) return;
    await this.checkRecordedHolder();
  }

  /**
   * Sends `msg` to every member (this node through handle()) and resolves as soon as `need`
   * granted it, or when every member answered or failed. Late replies are still learned from.
   */
  private gather(members: string[], need: number, msg: LeaseMessage): Promise<Gathered> {
    return new Promise((resolve) => {
      const g: Gathered = { ok: 0, refused: 0, replies: [] };
      let pending = members.length;
      let done = false;
      const settle = () => {
        if (done) return;
        // Success returns at once; a failure waits for every answer (bounded by the link's deadline)
        // so that "only k of n members stored" is exact and nothing counts after the 503.
        if (g.ok >= need || pending === 0) {
          done = true;
          resolve({ ok: g.ok, refused: g.refused, replies: [...g.replies] });
        }
      };
      for (const peer of members) {
        const call = peer === this.selfId ? this.handle(msg) : this.link.send(peer, msg);
        call
          .then(async (raw) => {
            const reply = parseLeaseReply(raw);
            await this.learn(reply);
            if (!done) {
              g.replies.push(reply);
              if (reply.ok) g.ok++;
              else g.refused++;
            }
          })
          .catch((err) => {
            if (!done) this.log.debug({ err, peer, type: msg.type }, 'lease peer did not answer');
          })
          .finally(() => {
            pending--;
            settle();
          });
      }
      settle();
    });
  }

  private async backoff(attempt: number): Promise<void> {
    await sleep(10 + Math.floor(Math.random() * 40 * attempt));
  }

  // -------------------------------------------------------------------------
  // Acceptor (called under the serial lock)

  private async onPrepare(epoch: number, by: string): Promise<boolean> {
    const a = this.acceptor;
    if (a.promised === epoch && a.promised_by === by) return true; // retransmission
    if (epoch <= this.highestLocalEpoch()) return false;
    await this.writeAcceptor({ promised: epoch, promised_by: by, accepted: a.accepted });
    return true;
  }

  private async onAccept(epoch: number, holder: string, by: string): Promise<boolean> {
    const a = this.acceptor;
    if (a.accepted && a.accepted.epoch === epoch) return a.accepted.holder === holder && a.accepted.by === by; // at most one value per epoch
    if (a.promised !== epoch || a.promised_by !== by) return false;
    if (epoch <= (a.accepted?.epoch ?? 0) || epoch <= this.record.epoch) return false;
    await this.writeAcceptor({ promised: epoch, promised_by: by, accepted: { epoch, holder, by } });
    return true;
  }

  private async writeAcceptor(next: AcceptorState): Promise<void> {
    await this.sub.put(ACCEPTOR_KEY, next);
    this.acceptor = next;
    this.maxSeen = Math.max(this.maxSeen, next.promised);
  }

  private reply(ok: boolean): LeaseReply {
    return {
      ok,
      from: this.selfId,
      record: { ...this.record },
      promised: this.acceptor.promised,
      accepted: this.acceptor.accepted ? { ...this.acceptor.accepted } : null,
    };
  }

  // -------------------------------------------------------------------------
  // Learning committed records

  /** Synchronous step-down: a higher committed epoch naming someone else ends holding at once. */
  private noteCommitted(rec: LeaseRecord): void {
    this.maxSeen = Math.max(this.maxSeen, rec.epoch);
    if (rec.epoch > this.record.epoch && rec.holder !== this.selfId && rec.epoch > this.fence) {
      this.fence = rec.epoch;
      this.emit();
    }
  }

  private async learn(reply: LeaseReply): Promise<void> {
    this.maxSeen = Math.max(this.maxSeen, reply.promised, reply.accepted?.epoch ?? 0);
    await this.learnRecord(reply.record);
  }

  private async learnRecord(rec: LeaseRecord): Promise<void> {
    if (rec.epoch < this.record.epoch) return;
    this.noteCommitted(rec);
    await this.changes.run(() => this.adoptLocked(rec));
  }

  private async adoptLocked(rec: LeaseRecord): Promise<void> {
    if (rec.epoch === this.record.epoch && rec.holder !== this.record.holder && rec.epoch > 0) {
      // Cannot happen if every member runs this protocol; say so loudly if it ever does.
      this.log.error({ mine: this.record, theirs: rec }, 'two holders reported for one lease epoch');
      return;
    }
    if (rec.epoch <= this.record.epoch) return;
    await this.sub.put(RECORD_KEY, rec);
    const before = this.record;
    this.record = { ...rec };
    this.maxSeen = Math.max(this.maxSeen, rec.epoch);
    if (before.holder !== rec.holder) this.log.info({ holder: rec.holder, epoch: rec.epoch, previous: before }, 'proxy lease holder changed');
    this.emit();
  }

  // -------------------------------------------------------------------------

  private emit(): void {
    const s = this.state();
    const l = this.lastEmitted;
    if (l && l.holder === s.holder && l.epoch === s.epoch && l.holding === s.holding) return;
    this.lastEmitted = s;
    for (const cb of this.listeners) {
      try {
        cb({ ...s });
      } catch (err) {
        this.log.error({ err }, 'lease onChange listener failed');
      }
    }
  }

  private highestLocalEpoch(): number {
    return Math.max(this.record.epoch, this.acceptor.promised, this.acceptor.accepted?.epoch ?? 0);
  }

  private memberIds(): string[] {
    const ids = new Set(this.link.members());
    ids.add(this.selfId);
    return [...ids];
  }

  private others(): string[] {
    return this.memberIds().filter((id) => id !== this.selfId);
  }

  private async reachable(peer: string): Promise<boolean> {
    try {
      return await this.link.isReachable(peer);
    } catch {
      return false;
    }
  }
}
