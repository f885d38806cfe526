/**
 * The proxy domain's sublevels on this node:
 *  - `proxy-intents`: the intent journal for what touches the host (the Caddy
 *    process, the floating addresses);
 *  - `proxy-state`: what this node has put on the host (`caddy` {pid},
 *    `vip` {iface, cidrs}), so that a restart after a crash finds and removes it;
 *  - `proxy-incidents`: captured incident bundles, keyed by a time-ordered id.
 *
 * Recovery at open undoes everything: a node that just started serves
 * nothing until the data plane decides it holds the lease, and then claims
 * everything again. Undoing is always safe; finishing could make two nodes
 * answer on the floating address.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { IntentJournal, type JournalOp } from '../lib/journal.js';
import type { Store, Sub } from '../store/store.js';

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
  config: unknown;
  /** The Caddy configuration hostd last asked for, provider credentials redacted. */
  caddy_config: unknown;
  /** Caddy's recent log lines, secrets redacted. */
  caddy_log: unknown[];
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

  putCaddy = (s: CaddyState): JournalOp => ({ type: 'put', sub: this.state, key: 'caddy', value: s });
  delCaddy = (): JournalOp => ({ type: 'del', sub: this.state, key: 'caddy' });
  putVip = (s: VipState): JournalOp => ({ type: 'put', sub: this.state, key: 'vip', value: s });
  delVip = (): JournalOp => ({ type: 'del', sub: this.state, key: 'vip' });
  /** IPv4 floating addresses parked on lo after a handoff (removed a few seconds later). */
  putParked = (addrs: string[]): JournalOp => ({ type: 'put', sub: this.state, key: 'parked', value: addrs });
  delParked = (): JournalOp => ({ type: 'del', sub: this.state, key: 'parked' });

  async caddy(): Promise<CaddyState | undefined> {
    return (await this.state.get('caddy')) as CaddyState | undefined;
  }

  async vip(): Promise<VipState | undefined> {
    return (await this.state.get('vip')) as VipState | undefined;
  }

  /**
   * Undoes what an earlier run left: open intents and recorded state alike.
   * `releaseVip` removes addresses; Caddy processes of this data dir are killed.
   */
  async recover(releaseVip: (s: VipState) => Promise<void>, dropParked: (addrs: string[]) => Promise<void>): Promise<{ intents: number; vip: boolean; caddy: boolean }> {
    let vip = false;
    let caddy = false;
    const intents = await this.journal.recover(async (_key, intent) => {
      if (intent.kind === 'vip-add' || intent.kind === 'vip-del') {
        await releaseVip({ iface: intent.iface, cidrs: intent.cidrs });
        vip = true;
        return [this.delVip()];
      }
      killCaddyOf(intent.boot, intent.kind === 'caddy-stop' ? intent.pid : null);
      caddy = true;
      return [this.delCaddy()];
    });
    const v = await this.vip();
    if (v) {
      await releaseVip(v);
      await this.state.del('vip');
      vip = true;
    }
    const parked = (await this.state.get('parked')) as string[] | undefined;
    if (parked) {
      await dropParked(parked);
      await this.state.del('parked');
      vip = true;
    }
    const c = await this.caddy();
    if (c) {
      killCaddyOf(c.boot, c.pid);
      await this.state.del('caddy');
      caddy = true;
    }
    return { intents, vip, caddy };
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

/**
 * Kills the Caddy that ran with this boot file: `pid` when it is still that
 * Caddy, and any other process whose command line names the boot file.
 */
function killCaddyOf(boot: string, pid: number | null): void {
  const pids = new Set<number>();
  if (pid) pids.add(pid);
  try {
    for (const d of fs.readdirSync('/proc')) if (/^\d+$/.test(d)) pids.add(Number(d));
  } catch {
    /* no /proc: only the recorded pid */
  }
  for (const p of pids) {
    let cmd: string;
    try {
      cmd = fs.readFileSync(`/proc/${p}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    const args = cmd.split('\0');
    if (args.includes(boot) && args.some((a) => a.endsWith('caddy')) && args.includes('run')) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        /* already gone */
      }
    }
  }
}
