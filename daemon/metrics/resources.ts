/**
 * The per-resource families of one kind (VMs, LXC containers, apps): one
 * pair of registries per kind, so that an exposition holds a kind's series
 * only for a token holding its read scope. Labels: the resource's id only;
 * its name is in `<prefix>_info` and its state in `<prefix>_state`, so a
 * rename or a state change starts no new series of the figures.
 */
import client from 'prom-client';
import type { GuestInfo, ResourceUsage } from '../domain.js';

export type ResourceKind = 'vm' | 'lxc' | 'app';

export interface ResourceKindDef {
  kind: ResourceKind;
  prefix: string;
  /** The read scope a token needs to see this kind's series. */
  scope: string;
  /** How docs and help texts name one resource. */
  what: string;
}

export const RESOURCE_KINDS: readonly ResourceKindDef[] = [
  { kind: 'vm', prefix: 'hostd_vm', scope: 'vm.read', what: 'VM' },
  { kind: 'lxc', prefix: 'hostd_lxc', scope: 'lxc.read', what: 'LXC container' },
  { kind: 'app', prefix: 'hostd_app', scope: 'apps.read', what: 'app' },
];

/** What a scrape knows of a kind's resources: each one's guest entry, and the figures of the running ones. */
export interface KindSnapshot {
  guests: GuestInfo[];
  usage: Map<string, ResourceUsage>;
}

type Figure = Exclude<keyof ResourceUsage, 'id'>;

const FIGURES: Array<{ key: Figure; suffix: string; counter: boolean; help: string }> = [
  { key: 'cpu_seconds', suffix: 'cpu_seconds_total', counter: true, help: 'CPU time used since it started' },
  { key: 'memory_bytes', suffix: 'memory_bytes', counter: false, help: 'memory in use' },
  { key: 'disk_read_bytes', suffix: 'disk_read_bytes_total', counter: true, help: 'bytes read from block devices since it started' },
  { key: 'disk_written_bytes', suffix: 'disk_written_bytes_total', counter: true, help: 'bytes written to block devices since it started' },
  { key: 'network_received_bytes', suffix: 'network_received_bytes_total', counter: true, help: 'bytes received on its network interfaces since it started' },
  { key: 'network_transmitted_bytes', suffix: 'network_transmitted_bytes_total', counter: true, help: 'bytes sent on its network interfaces since it started' },
];

export class ResourceFamilies {
  readonly text = new client.Registry();
  readonly open: client.Registry;

  constructor(
    readonly def: ResourceKindDef,
    snapshot: () => Promise<KindSnapshot | null>,
    openRegistry: () => client.Registry,
  ) {
    this.open = openRegistry();
    const registers = [this.text, this.open];
    const { prefix, what } = def;
    new client.Gauge({
      name: `${prefix}_info`,
      help: `Always 1 for each ${what}; the name label is its name now.`,
      labelNames: ['id', 'name'],
      registers,
      async collect() {
        this.reset();
        for (const g of (await snapshot())?.guests ?? []) this.set({ id: g.id, name: g.name }, 1);
      },
    });
    new client.Gauge({
      name: `${prefix}_state`,
      help: `Always 1 for each ${what}; the state label is its state now (the state word of its domain's API).`,
      labelNames: ['id', 'state'],
      registers,
      async collect() {
        this.reset();
        for (const g of (await snapshot())?.guests ?? []) this.set({ id: g.id, state: g.state }, 1);
      },
    });
    for (const f of FIGURES) {
      const help = `Each running ${what}'s ${f.help}; left out where its runtime does not give it.`;
      const fill = async (set: (id: string, v: number) => void) => {
        for (const u of (await snapshot())?.usage.values() ?? []) {
          const v = u[f.key];
          if (v !== null && Number.isFinite(v) && v >= 0) set(u.id, v);
        }
      };
      const name = `${prefix}_${f.suffix}`;
      if (f.counter) {
        new client.Counter({
          name,
          help,
          labelNames: ['id'],
          registers,
          async collect() {
            this.reset();
            await fill((id, v) => this.inc({ id }, v));
          },
        });
      } else {
        new client.Gauge({
          name,
          help,
          labelNames: ['id'],
          registers,
          async collect() {
            this.reset();
            await fill((id, v) => this.set({ id }, v));
          },
        });
      }
    }
  }
}
