/**
 * What every part of the proxy domain shares: the node, the cluster's lease
 * and replicated configuration, the drivers, the records, the settings and
 * the containment rules as this node applies them. The domain module makes
 * one; the data plane and the operations read it and keep their own state.
 */
import type { Logger } from 'pino';
import type { Config } from '../config.js';
import type { ClusterPorts, LeaseView, NodeIdentity, Ports } from '../domain.js';
import type { Availability } from '../lib/availability.js';
import type { CallContext } from '../lib/caller.js';
import { conflict } from '../lib/errors.js';
import type { SecretStore } from '../lib/secrets.js';
import type { PauseHook } from '../lib/test-pause.js';
import type { ProxyConfig, ProxyConfigSnapshot } from './config.js';
import type { ProxyDrivers } from './driver.js';
import { localAddresses } from './policy/addresses.js';
import { HeldPorts, configuredPorts } from './policy/listeners.js';
import { NameResolver } from './policy/resolve.js';
import type { RuleContext } from './policy/rules.js';
import type { ProxyRecords } from './records.js';
import type { ProxySettings } from './settings.js';

export interface ProxyContextDeps {
  node: NodeIdentity;
  cluster: ClusterPorts;
  ports: Ports;
  secrets: SecretStore;
  records: ProxyRecords;
  settings: ProxySettings;
  drivers: ProxyDrivers;
  log: Logger;
  /** The crash tests' pause (`HOSTD_TEST_PAUSE_AT=proxy.<step>`). */
  pause: PauseHook;
  /** The daemon's config: its listeners are ports no entry may publish or take. */
  hostdConfig: Config;
  /** `<data dir>/proxy` */
  dir: string;
}

/** `fn`'s answer, asked again at most every `ms` (this host's addresses, read per forwarded DNS query otherwise). */
function cachedFor<T>(ms: number, fn: () => T): () => T {
  let at = 0;
  let v: T;
  return () => {
    if (Date.now() - at >= ms) {
      v = fn();
      at = Date.now();
    }
    return v;
  };
}

export class ProxyContext {
  readonly node: NodeIdentity;
  readonly cluster: ClusterPorts;
  readonly ports: Ports;
  readonly secrets: SecretStore;
  readonly records: ProxyRecords;
  readonly settings: ProxySettings;
  readonly drivers: ProxyDrivers;
  readonly log: Logger;
  readonly pause: PauseHook;
  readonly dir: string;
  /** The containment rules as this node applies them (its settings, its listeners, its addresses). */
  readonly rules: RuleContext;

  constructor(d: ProxyContextDeps) {
    this.node = d.node;
    this.cluster = d.cluster;
    this.ports = d.ports;
    this.secrets = d.secrets;
    this.records = d.records;
    this.settings = d.settings;
    this.drivers = d.drivers;
    this.log = d.log;
    this.pause = d.pause;
    this.dir = d.dir;
    this.rules = {
      allowLoopback: d.settings.allowLoopbackUpstreams,
      allowPrivilegedPorts: d.settings.allowPrivilegedListenPorts,
      held: new HeldPorts(() => configuredPorts(d.hostdConfig, d.settings.dnsListen?.port ?? null)),
      local: cachedFor(1000, localAddresses),
      resolver: new NameResolver(),
    };
  }

  /** The replicated configuration with its version (the cluster validated it with config.ts). */
  config(): ProxyConfigSnapshot {
    return this.cluster.proxyConfig.get() as ProxyConfigSnapshot;
  }

  /** A copy of the configuration to change. */
  current(): ProxyConfig {
    return structuredClone(this.config().config);
  }

  lease(): LeaseView {
    return this.cluster.lease.state();
  }

  /** A node alone (no cluster) holds the proxy; in a cluster, the lease decides. */
  holdsProxy(): boolean {
    if (this.cluster.members().length <= 1) return true;
    return this.lease().holding;
  }

  serving(cfg: ProxyConfig = this.config().config): boolean {
    return cfg.enabled && this.holdsProxy();
  }

  /** The lease's holder; this node when it holds without a recorded holder (alone). */
  holder(): string | null {
    return this.lease().holder ?? (this.holdsProxy() ? this.node.id : null);
  }

  /** Every host program the proxy uses, as host-status and the domain's info list them. */
  async runtimes(opts?: { fresh?: boolean }): Promise<Availability[]> {
    const { caddy, addresses, dns } = this.drivers;
    return [...(await caddy.availability(opts)), ...(await addresses.availability(opts)), ...(await dns.availability(opts))];
  }

  /**
   * Runs `local` when this node holds the proxy; otherwise hands the call to
   * the holder (which records it), whose answer is this operation's answer;
   * a call that already came over the cluster to a node that no longer holds
   * gets 409 naming the holder.
   */
  async onHolder<T>(call: CallContext, local: () => Promise<T>): Promise<T> {
    if (this.holdsProxy()) return local();
    const holder = this.lease().holder;
    if (!holder) throw conflict('no node holds the proxy yet');
    if (call.forwardTo && call.caller.transport !== 'cluster') return (await call.forwardTo(holder)) as T;
    throw conflict(`this node does not hold the proxy; ask the holder ${holder} (call again with peer_id=${holder})`);
  }
}
