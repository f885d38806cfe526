/**
 * The proxy domain's sublevels on this node:
 *  - `proxy-intents`: the intent journal for what touches the host (the Caddy
 *    process, the floating addresses);
 *  - `proxy-state`: what this node has put on the host (`caddy` {pid},
 *    `vip` {iface, cidrs}), so that a restart after a crash finds and removes it;
 *  - `proxy-incidents`: captured incident bundles, keyed by a time-ordered id.
 *
 * Recovery at open (recovery.ts) undoes everything these record.
 */
import crypto from 'node:crypto';
import { IntentJournal, type JournalOp } from '../lib/journal.js';
import type { Store, Sub } from '../store/store.js';
import type { ProxyConfig } from './config.js';
import type { CaddyLogLine } from './driver.js';

export type ProxyIntent =
  | { kind: 'caddy-start'; boot: string }
  | { kind: 'caddy-stop'; pid: number | null; boot: string }
  | { kind: 'vip-add'; iface: string; cidrs: string[] }
  | { kind: 'vip-del'; iface: string; cidrs: string[] };

export interface CaddyState {
  pid: number;
  boot: string;
}

export interface VipState {
  iface: string;
  cidrs: string[];
}

export type IncidentKind = 'config_refused' | 'upstream_failed' | 'takeover' | 'caddy_exited' | 'vip_conflict';

export interface Incident {
  incident_id: string;
  kind: IncidentKind;
  at: string;
  node_id: string;
  summary: string;
  lease: { holder: string | null; epoch: number; holding: boolean };
  config_version: number;
  /** The replicated proxy configuration at the time (it holds no secrets). */
  config: ProxyConfig;
  /** The Caddy configuration hostd last asked for, provider credentials redacted (null: none). */
  caddy_config: unknown;
  /** Caddy's recent log lines, secrets redacted. */
  caddy_log: CaddyLogLine[];
  details: Record<string, unknown>;
}

export const MAX_INCIDENTS = 200;

export class ProxyRecords {
  readonly intents: Sub<ProxyIntent>;
  readonly state: Sub<unknown>;
  readonly incidents: Sub<Incident>;
  readonly journal: IntentJournal<ProxyIntent>;

  constructor(readonly store: Store) {
    this.intents = store.sub<ProxyIntent>('proxy-intents');
    this.state = store.sub<unknown>('proxy-state');
    this.incidents = store.sub<Incident>('proxy-incidents');
    this.journal = new IntentJournal<ProxyIntent>(store, this.intents);
  }

  /**
   * `caddy` and `vip` read as absent since their last put. The data plane's
   * tick asks for both several times a second on a member that holds neither
   * (most members, most of the time), and each read is a LevelDB get through
   * libuv's thread pool: a wakeup of a pool thread and of the loop. Only the
   * put ops below write the two keys, so building one forgets the absence;
   * `puts` tells a read that raced with a put not to keep its answer.
   */
  private readonly absent = new Set<'caddy' | 'vip'>();
  private puts = 0;

  putCaddy = (s: CaddyState): JournalOp => this.put('caddy', s);
  delCaddy = (): JournalOp => ({ type: 'del', sub: this.state, key: 'caddy' });
  putVip = (s: VipState): JournalOp => this.put('vip', s);
  delVip = (): JournalOp => ({ type: 'del', sub: this.state, key: 'vip' });
  /** IPv4 floating addresses parked on lo after a handoff (removed a few seconds later). */
  putParked = (addrs: string[]): JournalOp => ({ type: 'put', sub: this.state, key: 'parked', value: addrs });
  delParked = (): JournalOp => ({ type: 'del', sub: this.state, key: 'parked' });

  async caddy(): Promise<CaddyState | undefined> {
    return (await this.held('caddy')) as CaddyState | undefined;
  }

  async vip(): Promise<VipState | undefined> {
    return (await this.held('vip')) as VipState | undefined;
  }

  private put(key: 'caddy' | 'vip', value: CaddyState | VipState): JournalOp {
    this.puts++;
    this.absent.delete(key);
    return { type: 'put', sub: this.state, key, value };
  }

  private async held(key: 'caddy' | 'vip'): Promise<unknown> {
    if (this.absent.has(key)) return undefined;
    const puts = this.puts;
    const v = await this.state.get(key);
    if (v === undefined && puts === this.puts) this.absent.add(key);
    return v;
  }

  /** IPv4 floating addresses parked on lo by the last handoff, if any. */
  async parked(): Promise<string[] | undefined> {
    return (await this.state.get('parked')) as string[] | undefined;
  }

  async addIncident(inc: Omit<Incident, 'incident_id'>): Promise<Incident> {
    const id = `inc_${Date.now().toString(36).padStart(9, '0')}_${crypto.randomBytes(3).toString('hex')}`;
    const full = { incident_id: id, ...inc };
    await this.incidents.put(id, full);
    const keys = await this.incidents.keys().all();
    if (keys.length > MAX_INCIDENTS) {
      await this.store.batch(keys.slice(0, keys.length - MAX_INCIDENTS).map((key) => ({ type: 'del' as const, sub: this.incidents, key })));
    }
    return full;
  }

  async listIncidents(): Promise<Incident[]> {
    return (await this.incidents.values().all()).reverse();
  }

  async getIncident(id: string): Promise<Incident | undefined> {
    return this.incidents.get(id);
  }
}
