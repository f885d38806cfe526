/**
 * The domain contract. A domain is one folder under daemon/ with the same
 * rooms (index, handlers, service, driver, records, <runtime>/) and one entry
 * point: its `DomainDef`, listed once in daemon/domains.ts. `open(deps)` gives
 * its handlers, what it can tell about itself (`info`) and `close`.
 *
 * Domains reach each other only through ports (below), looked up when a call
 * needs them, so that imports stay one-way and opening order does not matter.
 */
import type { Logger } from 'pino';
import type { OperationName } from '../api/registry/index.js';
import type { HandlersOf } from '../api/registry/handlers.js';
import type { Availability } from './lib/availability.js';
import type { Tasks } from './lib/tasks.js';
import type { SecretStore } from './lib/secrets.js';
import { unavailable } from './lib/errors.js';
import type { Config } from './config.js';
import type { BatchOp, Store } from './store/store.js';

export interface NodeIdentity {
  id: string;
  name: string;
}

export interface DomainInfo {
  /** The domain's name, e.g. `vms`. */
  name: string;
  /** Whether this build serves its operations (false: they answer 501). */
  built: boolean;
  /** The host programs it drives, as they are now. */
  runtimes: Availability[];
}

export interface DomainModule<Ops extends OperationName> {
  handlers: HandlersOf<Ops>;
  info(): Promise<DomainInfo>;
  /** Stops background work; running guests and mounts stay (a restart finds them again). */
  close(): Promise<void>;
  /** Ports this domain offers the others. */
  provides?: Partial<PortTypes>;
  /**
   * Operator commands on the local admin socket (hostctl), by `METHOD /admin/...`
   * path, e.g. `POST /admin/vms/images/import`. Each answers [status, body];
   * the daemon writes one activity row per mutating admin call.
   */
  admin?: Record<string, AdminCommand>;
}

/** An operator command: the JSON body in, a status and JSON body out. */
export type AdminCommand = (body: Record<string, unknown>) => Promise<[number, unknown]>;

export interface DomainDef<Ops extends OperationName> {
  name: string;
  ops: readonly Ops[];
  open(deps: DomainDeps): Promise<DomainModule<Ops>>;
}

/** Declares a domain; `ops` lists the operations it serves (typed from the registry). */
export function defineDomain<Ops extends OperationName>(def: DomainDef<Ops>): DomainDef<Ops> {
  return def;
}

export interface DomainDeps {
  node: NodeIdentity;
  config: Config;
  /** The domain's own section of the config file (`<name>:`), unparsed: the domain validates it. */
  settings: unknown;
  env: NodeJS.ProcessEnv;
  store: Store;
  tasks: Tasks;
  /** Encrypted secrets (passwords, provider keys): never in the store, a response or a log. */
  secrets: SecretStore;
  log: Logger;
  ports: Ports;
  cluster: ClusterPorts;
  /** Where the domain reports state changes to the event stream (docs/events.md, "What each domain reports"). */
  events: EventsPort;
  /** What every domain of this build says about itself (built, runtimes), asked when called. */
  domainInfo(): Promise<DomainInfo[]>;
}

// ------------------------------------------------------------------ ports

/**
 * The event stream as a domain sees it: `publishState` writes one
 * `<domain>.state` event (synced) and resolves once it is in the store.
 * Report every change of a resource's state, including the ones nobody
 * asked for (a guest that powered itself off, a container whose init
 * exited, a mount that went stale), from the place that sees it (the
 * service after a call's change, the driver's watcher otherwise).
 * `resource` is the resource path (`vms/101`, `lxc/7`, `apps/wiki`,
 * `locations/loc_1`, `proxy`, `sandboxes/sb_1`); `state` the state word the
 * domain's records use; `data` what a client needs beside it (never a secret).
 * A sandbox's events name its owner token (`opts.owner`: id or name): only
 * that token receives them.
 */
export interface EventsPort {
  publishState(domain: string, resource: string, state: string, data?: Record<string, unknown>, opts?: StateEventOpts): Promise<void>;
  /**
   * The same event, written in the domain's own batch: `write` gets the
   * event's ops to add to the change's ops (one synced Store.batch), so the
   * change and its event are stored together (daemon/events/state.ts
   * `writeWithState`). Absent on a port a test builds by hand.
   */
  joinState?<T>(
    domain: string,
    resource: string,
    state: string,
    data: Record<string, unknown>,
    opts: StateEventOpts,
    write: (ops: BatchOp[]) => Promise<T>,
  ): Promise<T>;
}

/** Who made a state change (default the operator), its words, and the token that owns the resource (sandboxes). */
export interface StateEventOpts {
  actor?: string;
  summary?: string;
  owner?: string;
}

/** A managed folder as other domains see it. */
export interface FolderRef {
  folder_id: string;
  name: string;
  storage_id: string;
  /** Absolute directory on the host. */
  path: string;
}

export interface FoldersPort {
  /** The folder, or 404. */
  folder(folderId: string): FolderRef;
  /** Every managed folder. */
  list(): FolderRef[];
}

export interface ConnectionsPort {
  /** The absolute mount directory of a connected location: 404 unknown, 409 not mounted. */
  mountDir(locationId: string): Promise<string>;
}

/** A VM, container, app or sandbox as the system and proxy domains see it. */
export interface GuestInfo {
  kind: 'vm' | 'lxc' | 'app' | 'sandbox';
  /** Its id in its own domain (vmid, lxcid, app_id, sandbox id), as a string. */
  id: string;
  name: string;
  state: string;
  running: boolean;
  cpu_cores: number;
  memory_mb: number;
  /** Addresses the host can reach it on (IPs; for apps, host:port of published ports). */
  addresses: string[];
}

export interface GuestSource {
  guests(): Promise<GuestInfo[]>;
}

/*
 * The ports the metrics domain reads at scrape time, never on another call's
 * path (docs/metrics.md): `usage`, what a domain reads cheaply of its running
 * resources for the per-resource families (beside `guests`, which gives each
 * resource's id, name and state); `mountStates` (locations) and
 * `proxyFigures` (the proxy), read-only views for the aggregates.
 */
/** One running resource's cumulative figures (null: its runtime does not give that one). */
export interface ResourceUsage {
  /** Its id in its own domain, as in the guests port. */
  id: string;
  cpu_seconds: number | null;
  memory_bytes: number | null;
  disk_read_bytes: number | null;
  disk_written_bytes: number | null;
  network_received_bytes: number | null;
  network_transmitted_bytes: number | null;
}

export interface UsageSource {
  /** The guests port's kind of the resources it reads. */
  kind: GuestInfo['kind'];
  /** Figures of the running resources; a resource that is not running is left out. */
  usage(): Promise<ResourceUsage[]>;
}

/** Each location's status as the API shows it (`mounted`, `unavailable`, `disconnected`). */
export interface MountStates {
  statuses(): string[];
}

/** The proxy as this member serves it: its configuration's versions and each base domain's certificate. */
export interface ProxyFigures {
  /** The replicated configuration's version, the one this member's Caddy runs (null: none yet), and whether its last apply failed. */
  config(): { version: number; applied_version: number | null; apply_failed: boolean };
  /** Each base domain's wildcard certificate's end of validity as this member's Caddy storage holds it (null: none stored). */
  certificates(): Array<{ domain: string; not_after: string | null }>;
  /** Calls `watch` after every load of a configuration into this member's Caddy: `loaded`, `refused` by Caddy, or `failed` to reach it. */
  onApply(watch: (result: 'loaded' | 'refused' | 'failed', seconds: number) => void): void;
}

/*
 * Durations the metrics observe as each one ends (a scrape would miss the
 * ones between two scrapes): the domain calls each watcher once the start
 * or resume is stored; a watcher that throws never fails it.
 */
/** Sandbox starts (the sandboxes domain). */
export interface SandboxStarts {
  /** Calls `watch` after each sandbox's first start: `warm` (a resumed warm state) or `cold` (a boot), and the seconds from its create call to running. */
  onStart(watch: (method: 'warm' | 'cold', seconds: number) => void): void;
}

/** VM resumes from a warm state (the vms domain). */
export interface WarmResumes {
  /** Calls `watch` after each VM resumed from a warm state with the seconds the resume took (linked clone, seed, QEMU loading the memory). */
  onResume(watch: (seconds: number) => void): void;
}

/** Every port by name; a domain provides some in `DomainModule.provides`. */
export interface PortTypes {
  folders: FoldersPort;
  connections: ConnectionsPort;
  guests: GuestSource;
  usage: UsageSource;
  mountStates: MountStates;
  proxyFigures: ProxyFigures;
  sandboxStarts: SandboxStarts;
  warmResumes: WarmResumes;
}

export interface Ports {
  /** The one provider of a port; 503 naming the port when no domain provides it. */
  get<K extends keyof PortTypes>(name: K): PortTypes[K];
  /** Every provider of a port (e.g. all guest sources). */
  all<K extends keyof PortTypes>(name: K): Array<PortTypes[K]>;
}

/** The ports registry the composition root fills as domains open. */
export class PortRegistry implements Ports {
  private readonly providers = new Map<keyof PortTypes, unknown[]>();

  provide(p: Partial<PortTypes>): void {
    for (const [k, v] of Object.entries(p) as Array<[keyof PortTypes, unknown]>) {
      if (v === undefined) continue;
      const list = this.providers.get(k) ?? [];
      list.push(v);
      this.providers.set(k, list);
    }
  }

  get<K extends keyof PortTypes>(name: K): PortTypes[K] {
    const p = this.providers.get(name)?.[0];
    if (!p) throw unavailable(`no domain of this build provides ${name}`);
    return p as PortTypes[K];
  }

  all<K extends keyof PortTypes>(name: K): Array<PortTypes[K]> {
    return (this.providers.get(name) ?? []) as Array<PortTypes[K]>;
  }
}

// ------------------------------------------------------------------ cluster

export interface LeaseView {
  holder: string | null;
  epoch: number;
  /** Whether this node holds the lease now. */
  holding: boolean;
}

/** The proxy-holder lease as domains see it. */
export interface LeasePort {
  state(): LeaseView;
  /** Called on every change (a new holder or epoch); returns an unsubscribe. */
  onChange(cb: (s: LeaseView) => void): () => void;
  move(peerId: string): Promise<LeaseView>;
  takeover(): Promise<LeaseView>;
}

export interface ReplicatedSnapshot<T> {
  version: number;
  config: T;
}

/** A document replicated to every member with a version (the cluster does the replication). */
export interface ReplicatedDoc<T> {
  get(): ReplicatedSnapshot<T>;
  /** Applies a pure mutator on the newest copy, stores and pushes it. */
  update(mutator: (cur: T) => T): Promise<ReplicatedSnapshot<T> & { pushed: string[]; unreachable: string[] }>;
  onChange(cb: (s: ReplicatedSnapshot<T>) => void): () => void;
}

export interface ClusterPorts {
  lease: LeasePort;
  /**
   * The proxy domain's replicated configuration. The cluster replicates it
   * with the validation the proxy domain gave (daemon/proxy/config.ts), so the
   * proxy domain may treat it as its own type.
   */
  proxyConfig: ReplicatedDoc<unknown>;
  /** Every member id, this node included (just this node outside a cluster). */
  members(): string[];
  /** Members with address and reachability, as GET /peers shows them. */
  peers(): Promise<PeerInfo[]>;
  /**
   * 32 bytes every member derives alike for `purpose` (from the cluster's own
   * secret), so that members can agree on key material without sending it;
   * null outside a cluster.
   */
  sharedSecret(purpose: string): Buffer | null;
}

export interface PeerInfo {
  peer_id: string;
  name: string;
  address: string | null;
  is_self: boolean;
  reachable: boolean;
  last_seen: string | null;
}
