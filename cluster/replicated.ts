/**
 * A configuration document replicated to every member, with a version. The
 * cluster does the replication; the owning domain gives its shape (`spec`:
 * default, validation), so this file knows nothing of what it carries.
 *
 * Every node keeps the whole document with a version in its sublevel. An update on any node
 * applies a mutator to its copy, bumps the version, stores it durably and pushes it to every
 * reachable member; a member adopts a pushed copy only when it is newer. Copies are ordered by
 * (version, origin): the version first, then the id of the node that wrote it, so two nodes that
 * wrote the same version concurrently still converge to one copy everywhere. A member that
 * missed pushes (down, partitioned, just joined) catches up by sync(), which pulls from every
 * reachable member and keeps the newest; start() runs it on a timer.
 *
 * When a push finds a member with a newer copy (another node updated concurrently, or this
 * node had missed updates), the updater adopts that copy and applies its mutator again on top
 * of it, so neither change is lost while the members can reach each other. Mutators must
 * therefore be pure functions of the document they are given.
 */
import { SerialQueue } from '../daemon/lib/serial.js';
import { Periodic } from '../daemon/lib/periodic.js';
import type { Logger } from 'pino';
import type { Store, Sub } from '../daemon/store/store.js';
import { badRequest, conflict, forbidden } from '../daemon/lib/errors.js';
import type { LeasePeerLink } from './lease.js';

/** What the owning domain says about its document. */
export interface ReplicatedSpec<T> {
  /** Sublevel holding this node's copy. */
  sublevel: string;
  /** For messages: `proxy configuration`. */
  what: string;
  initial(): T;
  /** Checks a whole document (from an update, a peer or the disk); throws 400; returns a copy. */
  validate(value: unknown): T;
}

export interface ReplicatedSnapshot<T> {
  version: number;
  config: T;
}

export interface ReplicatedUpdate<T> extends ReplicatedSnapshot<T> {
  /** Members that stored this version during the update. */
  pushed: string[];
  /** Members that could not be reached; they catch up by sync(). */
  unreachable: string[];
}

/** A stored or transmitted copy. `origin` is the node that wrote this version ('' for the default). */
interface Versioned<T> {
  version: number;
  origin: string;
  config: T;
}

type Message<T> = { type: 'push'; from: string; version: number; origin: string; config: T } | { type: 'pull'; from: string };

interface Reply<T> {
  /** For a push: whether the receiver stored the pushed copy. */
  adopted: boolean;
  from: string;
  version: number;
  origin: string;
  /** The receiver's copy: on a pull, and on a push when the receiver's copy is newer. */
  config: T | null;
}

export const REPLICATION_SYNC_INTERVAL_MS = 2000;
const KEY = 'current';
const MAX_ATTEMPTS = 4;

const isObj = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

const isVersion = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
const isId = (value: unknown): value is string => typeof value === 'string' && value.length > 0 && value.length <= 256;

/** Validates an incoming replication message; throws 400. */
function parseMessage<T>(msg: unknown, spec: ReplicatedSpec<T>): Message<T> {
  if (!isObj(msg)) throw badRequest(`${spec.what} message must be an object`);
  if (!isId(msg.from)) throw badRequest(`${spec.what} message needs \`from\`, the sender member id`);
  if (msg.type === 'pull') return { type: 'pull', from: msg.from };
  if (msg.type === 'push') {
    if (!isVersion(msg.version) || msg.version < 1) throw badRequest('push needs a positive integer `version`');
    if (!isId(msg.origin)) throw badRequest('push needs `origin`, the member that wrote the version');
    return { type: 'push', from: msg.from, version: msg.version, origin: msg.origin, config: spec.validate(msg.config) };
  }
  throw badRequest(`unknown ${spec.what} message type ${JSON.stringify(msg.type)}`);
}

function parseReply<T>(v: unknown, spec: ReplicatedSpec<T>): Reply<T> {
  if (!isObj(v)) throw badRequest(`${spec.what} reply must be an object`);
  if (typeof v.adopted !== 'boolean' || !isId(v.from) || !isVersion(v.version) || typeof v.origin !== 'string') {
    throw badRequest(`${spec.what} reply needs adopted, from, version and origin`);
  }
  return {
    adopted: v.adopted,
    from: v.from,
    version: v.version,
    origin: v.origin,
    config: v.config === null || v.config === undefined ? null : spec.validate(v.config),
  };
}

/** (version, origin) order. */
function newer(candidate: { version: number; origin: string }, current: { version: number; origin: string }): boolean {
  return candidate.version > current.version || (candidate.version === current.version && candidate.origin > current.origin);
}

// ---------------------------------------------------------------------------

export class ReplicatedConfig<T> {
  private readonly sub: Sub<unknown>;
  private readonly selfId: string;
  private current: Versioned<T>;
  private readonly changes = new SerialQueue();
  private readonly updates = new SerialQueue();
  private readonly listeners = new Set<(snapshot: ReplicatedSnapshot<T>) => void>();
  private readonly periodic = new Periodic(
    () => this.sync(),
    (err) => this.log.debug({ err }, `${this.spec.what} sync failed`),
  );

  constructor(
    store: Store,
    private readonly link: LeasePeerLink,
    private readonly log: Logger,
    private readonly spec: ReplicatedSpec<T>,
  ) {
    this.sub = store.sub<unknown>(spec.sublevel);
    this.selfId = link.selfId;
    this.current = { version: 0, origin: '', config: spec.initial() };
  }

  async init(): Promise<void> {
    const v = await this.sub.get(KEY);
    if (v !== undefined && isObj(v) && isVersion(v.version) && typeof v.origin === 'string') {
      this.current = { version: v.version, origin: v.origin, config: this.spec.validate(v.config) };
    }
  }

  /** Runs sync() now and then every `intervalMs`. */
  start(intervalMs = REPLICATION_SYNC_INTERVAL_MS): void {
    this.periodic.start(intervalMs);
  }

  stop(): void {
    this.periodic.stop();
  }

  /** This node's copy (a deep copy; mutate it only through update()). */
  get(): ReplicatedSnapshot<T> {
    return { version: this.current.version, config: structuredClone(this.current.config) };
  }

  /** Fires whenever this node's copy changes (local update, push or sync). Returns an unsubscribe function. */
  onChange(cb: (snapshot: ReplicatedSnapshot<T>) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /**
   * Applies `mutator` to the current configuration, stores it as the next version and pushes
   * it to every member. Errors thrown by the mutator (ApiError 400/404/409 ...) pass through
   * and nothing is stored. 409 when other members kept writing newer versions throughout.
   */
  async update(mutator: (config: T) => T): Promise<ReplicatedUpdate<T>> {
    return this.updates.run(async () => {
      for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
        const base = this.current;
        const config = this.spec.validate(mutator(structuredClone(base.config)));
        const next: Versioned<T> = { version: base.version + 1, origin: this.selfId, config };
        const stored = await this.changes.run(() => this.adoptLocked(next));
        if (!stored) continue; // a newer copy arrived meanwhile: apply the mutator to it
        const msg: Message<T> = { type: 'push', from: this.selfId, ...next };
        const pushed: string[] = [];
        const unreachable: string[] = [];
        let superseded = false;
        await Promise.all(
          this.others().map(async (peer) => {
            try {
              const reply = parseReply(await this.link.sendProxyConfig(peer, msg), this.spec);
              if (reply.adopted) pushed.push(peer);
              else if (newer(reply, next) && reply.config) {
                superseded = true;
                await this.changes.run(() => this.adoptLocked({ version: reply.version, origin: reply.origin, config: reply.config! }));
              } else if (reply.version === next.version && reply.origin === next.origin) pushed.push(peer); // already had it
            } catch (err) {
              this.log.debug({ err, peer }, `${this.spec.what} push not delivered; the peer catches up by sync`);
              unreachable.push(peer);
            }
          }),
        );
        if (superseded) continue;
        this.log.info({ version: next.version, pushed: pushed.length, unreachable }, `${this.spec.what} updated`);
        return { version: next.version, config: structuredClone(next.config), pushed: pushed.sort(), unreachable: unreachable.sort() };
      }
      throw conflict(`the ${this.spec.what} kept changing on other members; try again`);
    });
  }

  /** Incoming replication message from a member. */
  async handle(msg: unknown): Promise<unknown> {
    const m = parseMessage(msg, this.spec);
    if (m.from !== this.selfId && !this.link.members().includes(m.from)) {
      throw forbidden(`${this.spec.what} message from ${m.from}, which is not a cluster member`);
    }
    if (m.type === 'pull') return this.reply(false, true);
    const adopted = await this.changes.run(() => this.adoptLocked({ version: m.version, origin: m.origin, config: m.config }));
    const mineNewer = newer(this.current, m);
    return this.reply(adopted, mineNewer);
  }

  /** Pulls from every reachable member and keeps the newest copy. */
  async sync(): Promise<ReplicatedSnapshot<T>> {
    const msg: Message<T> = { type: 'pull', from: this.selfId };
    await Promise.allSettled(
      this.others().map(async (peer) => {
        const reply = parseReply(await this.link.sendProxyConfig(peer, msg), this.spec);
        if (reply.config && newer(reply, this.current)) {
          await this.changes.run(() => this.adoptLocked({ version: reply.version, origin: reply.origin, config: reply.config! }));
        }
      }),
    );
    return this.get();
  }

  // -------------------------------------------------------------------------

  private reply(adopted: boolean, withConfig: boolean): Reply<T> {
    return {
      adopted,
      from: this.selfId,
      version: this.current.version,
      origin: this.current.origin,
      config: withConfig ? structuredClone(this.current.config) : null,
    };
  }

  /** Stores `v` if it is newer than the current copy. Under the serial lock. */
  private async adoptLocked(copy: Versioned<T>): Promise<boolean> {
    if (!newer(copy, this.current)) return false;
    await this.sub.put(KEY, copy);
    this.current = { version: copy.version, origin: copy.origin, config: structuredClone(copy.config) };
    const snap = this.get();
    for (const cb of this.listeners) {
      try {
        cb(snap);
      } catch (err) {
        this.log.error({ err }, `${this.spec.what} onChange listener failed`);
      }
    }
    return true;
  }

  private others(): string[] {
    return [...new Set(this.link.members())].filter((id) => id !== this.selfId);
  }
}
