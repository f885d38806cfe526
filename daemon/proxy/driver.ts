/**
 * What the proxy domain needs from the host, in three drivers (one per
 * runtime folder), each with the availability every driver reports:
 *
 *  - `CaddyDriver` (caddy/): the Caddy process on the holder, the
 *    configuration it serves, its certificate storage and admin API, and the
 *    internal CA's root it is given;
 *  - `AddressDriver` (net/): the floating addresses (iproute2, iputils
 *    arping) and the guard that takes them off when hostd dies;
 *  - `DnsDriver` (dns/): the built-in DNS responder's sockets.
 *
 * The types here are the domain's: nothing above the runtime folders knows
 * Caddy's JSON, an `ip` command line or a DNS packet.
 */
import type { RuntimeDriver } from '../lib/availability.js';
import type { ProxyConfig } from './config.js';
import type { HostPort } from './host-port.js';

// ------------------------------------------------------------------ Caddy

/** Caddy refused a configuration; `reason` is Caddy's own message. */
export class ConfigRefused extends Error {
  constructor(readonly reason: string) {
    super(reason);
    this.name = 'ConfigRefused';
  }
}

/** The internal CA's root, the same on every member (clients trust it once). */
export interface CaRoot {
  certFile: string;
  keyFile: string;
  /** The root certificate (PEM): what clients trust. */
  certPem: string;
  /** SHA-256 of the certificate (DER), hex. */
  fingerprint: string;
}

/** Where an entry's upstream is dialled (an address the rules checked), or why it cannot be now. */
export type UpstreamDial = { dial: string; serverName?: string | null } | { error: string };

/**
 * Everything Caddy is to serve on this node: the configuration with the
 * rules' decisions (policy/) already taken. Entries are keyed by entryKey().
 */
export interface ServePlan {
  config: ProxyConfig;
  /** Host part of every listener; '' binds all addresses. */
  listenHost: string;
  upstreams: Map<string, UpstreamDial>;
  /** Entries the rules refuse here: Caddy dials nothing for them and sends none of their headers. */
  refused: Map<string, { rule: string }>;
  /** Domains left out (reported, not loaded). */
  skipDomains: Set<string>;
  /** ACME DNS provider credentials by provider (from the secret store). */
  credentials: Map<string, Record<string, string>>;
  caRoot: CaRoot;
}

/** One line of Caddy's structured log. */
export interface CaddyLogLine {
  ts: string;
  level: string;
  logger: string;
  msg: string;
  /** The rest of the structured line (error, identifier, ...). */
  fields: Record<string, unknown>;
}

/** The certificate Caddy stored for `*.<domain>`. */
export interface StoredCertificate {
  issuer: string;
  serial: string;
  not_before: string;
  not_after: string;
  /** The issuer's directory in Caddy's storage (`local`, an ACME directory). */
  storage_issuer: string;
}

/** Caddy's own counters for one upstream it dials. */
export interface UpstreamCounter {
  address: string;
  num_requests: number;
  fails: number;
}

export interface CaddyDriver extends RuntimeDriver {
  // The build
  /** Every module of this Caddy build (`dns.providers.<name>` tells which ACME DNS providers work). */
  modules(): Promise<ReadonlySet<string>>;

  // The internal CA
  /** The root for `seed`: the same seed makes the same bytes on every member; made once per seed. */
  caRoot(seed: Buffer): Promise<CaRoot>;

  // The process
  /** What a journal intent names to find a Caddy of this data dir after a crash. */
  readonly bootFile: string;
  running(): boolean;
  pid(): number | null;
  /** Starts Caddy serving nothing yet, tied to hostd's life; resolves with its pid once its admin API answers. */
  start(root: CaRoot): Promise<number>;
  stop(): Promise<void>;
  /** Called when Caddy exits without stop() having asked it to; returns an unsubscribe. */
  onExit(cb: (code: number | null, signal: string | null) => void): () => void;
  /** Kills a Caddy a crashed run left: `pid` when it is still that Caddy, and any Caddy started with `boot`. */
  killLeftover(boot: string, pid: number | null): void;
  /** Caddy's recent log lines, oldest first. */
  log(n?: number): CaddyLogLine[];

  // The configuration
  /**
   * Makes Caddy serve `plan`; false when it serves exactly that already. A
   * configuration Caddy refuses is a ConfigRefused, and Caddy serves the last
   * good one again.
   */
  serve(plan: ServePlan): Promise<boolean>;
  /** Caddy's servers go (the admin API and storage stay): clients are refused at once. */
  unserve(root: CaRoot): Promise<void>;
  /** What `plan` would load, provider credentials redacted (for an incident). */
  preview(plan: ServePlan): unknown;
  /** What Caddy was last given, provider credentials redacted; null when nothing. */
  loaded(): unknown;

  // Certificates and the admin API
  /** The stored certificate of `*.<domain>`: null when none, an error when it cannot be read. */
  storedCertificate(domain: string): StoredCertificate | { error: string } | null;
  /** Drops the stored certificate of `*.<domain>` and reloads, so that Caddy obtains a new one. */
  renewCertificate(domain: string): Promise<void>;
  /** Whether Caddy's admin API answers. */
  adminAnswers(): Promise<boolean>;
  /** Caddy's counters per upstream address (none when the admin API does not answer). */
  upstreamCounters(): Promise<UpstreamCounter[]>;
}

// ------------------------------------------------------------------ floating addresses

/** Floating addresses on one interface, as `addr/prefix`; the IPv4 one first. */
export interface FloatingAddresses {
  iface: string;
  cidrs: string[];
}

/** The guard process that hands the addresses off if hostd dies. */
export interface AddressGuard {
  /** Ends the guard without it touching the addresses; resolves once it is gone (2 s at most). */
  disarm(): Promise<void>;
}

export interface AddressDriver extends RuntimeDriver {
  interfaceExists(iface: string): Promise<boolean>;
  /** Arms the guard for `a` (before the addresses are added: hostd may die the moment they are up). */
  guard(a: FloatingAddresses, holdSeconds: number): AddressGuard;
  /** Adds and announces the addresses; 409 when another host still answers for the IPv4 one. */
  claim(a: FloatingAddresses): Promise<void>;
  /**
   * Takes the addresses off the interface, each IPv4 one parked on lo first
   * (it answers no ARP there; clients still sent here get a reset at once).
   * Returns the parked addresses, for dropParked a few seconds later.
   */
  handOff(a: FloatingAddresses): Promise<string[]>;
  dropParked(addrs: string[]): Promise<void>;
  /** Removes the addresses and their parked copies (what a crashed run left); nothing there is no error. */
  remove(a: FloatingAddresses): Promise<void>;
}

// ------------------------------------------------------------------ DNS responder

/** What the responder answers for a name. */
export interface ZoneAnswer {
  /** Whether the name is under a configured base domain. */
  inZone: boolean;
  a: string[];
  aaaa: string[];
}

export interface ResponderHooks {
  zone(name: string): ZoneAnswer;
  /** Where names outside the zones are forwarded, in order. */
  upstreams(): HostPort[];
}

export interface DnsStats {
  answered: number;
  forwarded: number;
  failed: number;
}

export interface DnsServer {
  readonly listen: HostPort;
  running(): boolean;
  stats(): DnsStats;
  stop(): Promise<void>;
}

export interface DnsDriver extends RuntimeDriver {
  /** Answers on `listen` (UDP and TCP); throws when it cannot bind. */
  serve(listen: HostPort, hooks: ResponderHooks): Promise<DnsServer>;
}

/** The proxy's drivers, as the domain module composes them. */
export interface ProxyDrivers {
  caddy: CaddyDriver;
  addresses: AddressDriver;
  dns: DnsDriver;
}
