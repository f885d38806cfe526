/**
 * The reverse proxy's configuration as replicated cluster state.
 *
 * Every node keeps the whole configuration with a version in the `proxy-config` sublevel.
 * An update on any node applies a mutator to its copy, bumps the version, stores it durably
 * and pushes it to every reachable member; a member adopts a pushed copy only when it is
 * newer. Copies are ordered by (version, origin): the version first, then the id of the node
 * that wrote it, so two nodes that wrote the same version concurrently still converge to one
 * copy everywhere. A member that missed pushes (down, partitioned, just joined) catches up by
 * sync(), which pulls from every reachable member and keeps the newest; start() runs it on a
 * timer.
 *
 * When a push finds a member with a newer copy (another node updated concurrently, or this
 * node had missed updates), the updater adopts that copy and applies its mutator again on top
 * of it, so neither change is lost while the members can reach each other. Mutators must
 * therefore be pure functions of the configuration they are given.
 *
 * SECRETS ARE NOT PART OF THIS OBJECT. ACME DNS provider credentials (`PUT /proxy/acme/credentials`)
 * go to the secret store, never here: this object is copied to every member, shown by
 * `GET /proxy/config` and logged. validateProxyConfig refuses credential-looking keys.
 */
import { SerialQueue } from './serial.js';
import { Periodic } from './periodic.js';
import type { Logger } from 'pino';
import type { Store, Sub } from '../daemon/store/store.js';
import { badRequest, conflict, forbidden } from '../api/errors.js';
import type { LeaseManager, LeasePeerLink } from './lease.js';

export interface ProxyDomain {
  name: string;
  /** `internal` for the internal CA, or a DNS provider name for a public ACME certificate. */
  cert_source: string;
  /** Subdomain entries as the proxy API stores them (subdomain, port, host, listen_port, ...). */
  entries: Array<Record<string, unknown>>;
}

/** ACME account settings. The DNS provider credentials are NOT here: they go to the secret store. */
export interface ProxyAcme {
  email: string;
  /** Empty uses the public production directory. */
  dir_url: string;
  /** Resolvers for the DNS-01 propagation precheck; null or empty uses 1.1.1.1 and 8.8.8.8. */
  dns_resolvers: string[] | null;
}

export interface ProxyVip {
  vip: string;
  vip_iface: string;
  vip_prefix: number;
  vip6: string | null;
  vip6_prefix: number | null;
}

export interface ProxyConfig {
  enabled: boolean;
  http3: boolean;
  domains: ProxyDomain[];
  acme: ProxyAcme | null;
  vip: ProxyVip | null;
  dns_upstreams: string[];
}

export interface ProxyConfigSnapshot {
  version: number;
  config: ProxyConfig;
}

export interface ProxyConfigUpdateResult extends ProxyConfigSnapshot {
  /** Members that stored this version during the update. */
  pushed: string[];
  /** Members that could not be reached; they catch up by sync(). */
  unreachable: string[];
}

/** What GET /proxy/config shows. */
export interface ProxyConfigView {
  holder: string | null;
  epoch: number;
  holding_here: boolean;
  version: number;
  config: ProxyConfig;
}

/** A stored or transmitted copy. `origin` is the node that wrote this version ('' for the default). */
interface Versioned {
  version: number;
  origin: string;
  config: ProxyConfig;
}

export type ProxyConfigMessage =
  | { type: 'push'; from: string; version: number; origin: string; config: ProxyConfig }
  | { type: 'pull'; from: string };

export interface ProxyConfigReply {
  /** For a push: whether the receiver stored the pushed copy. */
  adopted: boolean;
  from: string;
  version: number;
  origin: string;
  /** The receiver's copy: on a pull, and on a push when the receiver's copy is newer. */
  config: ProxyConfig | null;
}

export const PROXY_CONFIG_SYNC_INTERVAL_MS = 2000;
const KEY = 'current';
const MAX_ATTEMPTS = 4;

export function defaultProxyConfig(): ProxyConfig {
  return { enabled: false, http3: false, domains: [], acme: null, vip: null, dns_upstreams: [] };
}

// ---------------------------------------------------------------------------
// Validation

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isStrArray = (v: unknown): v is string[] => Array.isArray(v) && v.every((x) => typeof x === 'string');
const SECRET_KEY = /credential|secret|password|passwd|token|api_?key|private_?key/i;

function onlyKeys(o: Record<string, unknown>, allowed: readonly string[], what: string): void {
  for (const k of Object.keys(o)) {
    if (SECRET_KEY.test(k)) throw badRequest(`${what}.${k}: credentials do not belong in the replicated proxy configuration; they go to the secret store`);
    if (!allowed.includes(k)) throw badRequest(`${what} has an unknown field '${k}'`);
  }
}

/** Checks a whole configuration; throws 400 naming the first problem. Returns a deep copy. */
export function validateProxyConfig(v: unknown): ProxyConfig {
  if (!isObj(v)) throw badRequest('proxy configuration must be an object');
  onlyKeys(v, ['enabled', 'http3', 'domains', 'acme', 'vip', 'dns_upstreams'], 'config');
  if (typeof v.enabled !== 'boolean') throw badRequest('config.enabled must be a boolean');
  if (typeof v.http3 !== 'boolean') throw badRequest('config.http3 must be a boolean');
  if (!Array.isArray(v.domains)) throw badRequest('config.domains must be an array');
  const names = new Set<string>();
  v.domains.forEach((d, i) => {
    const what = `config.domains[${i}]`;
    if (!isObj(d)) throw badRequest(`${what} must be an object`);
    onlyKeys(d, ['name', 'cert_source', 'entries'], what);
    if (typeof d.name !== 'string' || d.name === '') throw badRequest(`${what}.name must be a non-empty string`);
    if (names.has(d.name)) throw badRequest(`${what}.name '${d.name}' appears twice`);
    names.add(d.name);
    if (typeof d.cert_source !== 'string' || d.cert_source === '') throw badRequest(`${what}.cert_source must be a non-empty string`);
    if (!Array.isArray(d.entries) || !d.entries.every(isObj)) throw badRequest(`${what}.entries must be an array of objects`);
  });
  if (v.acme !== null) {
    if (!isObj(v.acme)) throw badRequest('config.acme must be an object or null');
    onlyKeys(v.acme, ['email', 'dir_url', 'dns_resolvers'], 'config.acme');
    if (typeof v.acme.email !== 'string') throw badRequest('config.acme.email must be a string');
    if (typeof v.acme.dir_url !== 'string') throw badRequest('config.acme.dir_url must be a string');
    if (v.acme.dns_resolvers !== null && !isStrArray(v.acme.dns_resolvers)) throw badRequest('config.acme.dns_resolvers must be an array of strings or null');
  }
  if (v.vip !== null) {
    if (!isObj(v.vip)) throw badRequest('config.vip must be an object or null');
    onlyKeys(v.vip, ['vip', 'vip_iface', 'vip_prefix', 'vip6', 'vip6_prefix'], 'config.vip');
    const { vip, vip_iface, vip_prefix, vip6, vip6_prefix } = v.vip;
    if (typeof vip !== 'string' || typeof vip_iface !== 'string') throw badRequest('config.vip.vip and vip_iface must be strings');
    if (!Number.isInteger(vip_prefix) || (vip_prefix as number) < 1 || (vip_prefix as number) > 32) throw badRequest('config.vip.vip_prefix must be an integer 1-32');
    if (vip6 !== null && typeof vip6 !== 'string') throw badRequest('config.vip.vip6 must be a string or null');
    if (vip6_prefix !== null && (!Number.isInteger(vip6_prefix) || (vip6_prefix as number) < 1 || (vip6_prefix as number) > 128)) {
      throw badRequest('config.vip.vip6_prefix must be an integer 1-128 or null');
    }
  }
  if (!isStrArray(v.dns_upstreams)) throw badRequest('config.dns_upstreams must be an array of strings');
  return structuredClone(v) as unknown as ProxyConfig;
}

const isVersion = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
const isId = (v: unknown): v is string => typeof v === 'string' && v.length > 0 && v.length <= 256;

/** Validates an incoming replication message; throws 400. */
export function parseProxyConfigMessage(msg: unknown): ProxyConfigMessage {
  if (!isObj(msg)) throw badRequest('proxy config message must be an object');
  if (!isId(msg.from)) throw badRequest('proxy config message needs `from`, the sender member id');
  if (msg.type === 'pull') return { type: 'pull', from: msg.from };
  if (msg.type === 'push') {
    if (!isVersion(msg.version) || msg.version < 1) throw badRequest('push needs a positive integer `version`');
    if (!isId(msg.origin)) throw badRequest('push needs `origin`, the member that wrote the version');
    return { type: 'push', from: msg.from, version: msg.version, origin: msg.origin, config: validateProxyConfig(msg.config) };
  }
  throw badRequest(`unknown proxy config message type ${JSON.stringify(msg.type)}`);
}

export function parseProxyConfigReply(v: unknown): ProxyConfigReply {
  if (!isObj(v)) throw badRequest('proxy config reply must be an object');
  if (typeof v.adopted !== 'boolean' || !isId(v.from) || !isVersion(v.version) || typeof v.origin !== 'string') {
    throw badRequest('proxy config reply needs adopted, from, version and origin');
  }
  return { adopted: v.adopted, from: v.from, version: v.version, origin: v.origin, config: v.config === null || v.config === undefined ? null : validateProxyConfig(v.config) };
}

/** (version, origin) order. */
function newer(a: { version: number; origin: string }, b: { version: number; origin: string }): boolean {
  return a.version > b.version || (a.version === b.version && a.origin > b.origin);
}

// ---------------------------------------------------------------------------

export class ProxyConfigStore {
  private readonly sub: Sub<unknown>;
  private readonly selfId: string;
  private current: Versioned = { version: 0, origin: '', config: defaultProxyConfig() };
  private readonly changes = new SerialQueue();
  private readonly updates = new SerialQueue();
  private readonly listeners = new Set<(s: ProxyConfigSnapshot) => void>();
  private readonly periodic = new Periodic(() => this.sync(), (err) => this.log.debug({ err }, 'proxy config sync failed'));

  constructor(
    store: Store,
    private readonly link: LeasePeerLink,
    private readonly log: Logger,
  ) {
    this.sub = store.sub<unknown>('proxy-config');
    this.selfId = link.selfId;
  }

  async init(): Promise<void> {
    const v = await this.sub.get(KEY);
    if (v !== undefined && isObj(v) && isVersion(v.version) && typeof v.origin === 'string') {
      this.current = { version: v.version, origin: v.origin, config: validateProxyConfig(v.config) };
    }
  }

  /** Runs sync() now and then every `intervalMs`. */
  start(intervalMs = PROXY_CONFIG_SYNC_INTERVAL_MS): void {
    this.periodic.start(intervalMs);
  }

  stop(): void {
    this.periodic.stop();
  }

  /** This node's copy (a deep copy; mutate it only through update()). */
  get(): ProxyConfigSnapshot {
    return { version: this.current.version, config: structuredClone(this.current.config) };
  }

  /** Fires whenever this node's copy changes (local update, push or sync). Returns an unsubscribe function. */
  onChange(cb: (s: ProxyConfigSnapshot) => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /**
   * Applies `mutator` to the current configuration, stores it as the next version and pushes
   * it to every member. Errors thrown by the mutator (ApiError 400/404/409 ...) pass through
   * and nothing is stored. 409 when other members kept writing newer versions throughout.
   */
  async update(mutator: (c: ProxyConfig) => ProxyConfig): Promise<ProxyConfigUpdateResult> {
    return this.updates.run(async () => {
      for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
        const base = this.current;
        const config = validateProxyConfig(mutator(structuredClone(base.config)));
        const next: Versioned = { version: base.version + 1, origin: this.selfId, config };
        const stored = await this.changes.run(() => this.adoptLocked(next));
        if (!stored) continue; // a newer copy arrived meanwhile: apply the mutator to it
        const msg: ProxyConfigMessage = { type: 'push', from: this.selfId, ...next };
        const pushed: string[] = [];
        const unreachable: string[] = [];
        let superseded = false;
        await Promise.all(
          this.others().map(async (peer) => {
            try {
              const reply = parseProxyConfigReply(await this.link.sendProxyConfig(peer, msg));
              if (reply.adopted) pushed.push(peer);
              else if (newer(reply, next) && reply.config) {
                superseded = true;
                await this.changes.run(() => this.adoptLocked({ version: reply.version, origin: reply.origin, config: reply.config! }));
              } else if (reply.version === next.version && reply.origin === next.origin) pushed.push(peer); // already had it
            } catch (err) {
              this.log.debug({ err, peer }, 'proxy config push not delivered; the peer catches up by sync');
              unreachable.push(peer);
            }
          }),
        );
        if (superseded) continue;
        this.log.info({ version: next.version, pushed: pushed.length, unreachable }, 'proxy configuration updated');
        return { version: next.version, config: structuredClone(next.config), pushed: pushed.sort(), unreachable: unreachable.sort() };
      }
      throw conflict('the proxy configuration kept changing on other members; try again');
    });
  }

  /** Incoming replication message from a member. */
  async handle(msg: unknown): Promise<unknown> {
    const m = parseProxyConfigMessage(msg);
    if (m.from !== this.selfId && !this.link.members().includes(m.from)) {
      throw forbidden(`proxy config message from ${m.from}, which is not a cluster member`);
    }
    if (m.type === 'pull') return this.reply(false, true);
    const adopted = await this.changes.run(() => this.adoptLocked({ version: m.version, origin: m.origin, config: m.config }));
    const mineNewer = newer(this.current, m);
    return this.reply(adopted, mineNewer);
  }

  /** Pulls from every reachable member and keeps the newest copy. */
  async sync(): Promise<ProxyConfigSnapshot> {
    const msg: ProxyConfigMessage = { type: 'pull', from: this.selfId };
    await Promise.allSettled(
      this.others().map(async (peer) => {
        const reply = parseProxyConfigReply(await this.link.sendProxyConfig(peer, msg));
        if (reply.config && newer(reply, this.current)) {
          await this.changes.run(() => this.adoptLocked({ version: reply.version, origin: reply.origin, config: reply.config! }));
        }
      }),
    );
    return this.get();
  }

  // -------------------------------------------------------------------------

  private reply(adopted: boolean, withConfig: boolean): ProxyConfigReply {
    return {
      adopted,
      from: this.selfId,
      version: this.current.version,
      origin: this.current.origin,
      config: withConfig ? structuredClone(this.current.config) : null,
    };
  }

  /** Stores `v` if it is newer than the current copy. Under the serial lock. */
  private async adoptLocked(v: Versioned): Promise<boolean> {
    if (!newer(v, this.current)) return false;
    await this.sub.put(KEY, v);
    this.current = { version: v.version, origin: v.origin, config: structuredClone(v.config) };
    const snap = this.get();
    for (const cb of this.listeners) {
      try {
        cb(snap);
      } catch (err) {
        this.log.error({ err }, 'proxy config onChange listener failed');
      }
    }
    return true;
  }

  private others(): string[] {
    return [...new Set(this.link.members())].filter((id) => id !== this.selfId);
  }


}

/** What GET /proxy/config returns on node `selfId`. */
export function proxyConfigView(lease: Pick<LeaseManager, 'state'>, configStore: Pick<ProxyConfigStore, 'get'>, selfId: string): ProxyConfigView {
  const l = lease.state();
  const c = configStore.get();
  return { holder: l.holder, epoch: l.epoch, holding_here: l.holding && l.holder === selfId, version: c.version, config: c.config };
}
