/**
 * Containers as records: list, get, update and delete, and the guests port
 * through which system allocation and the proxy see them. Making containers
 * (create, clone) is create.ts; running them is lifecycle.ts.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { withPrefix } from '../../api/registry/schema.js';
import type { GuestInfo, ResourceUsage } from '../domain.js';
import { conflict } from '../lib/errors.js';
import type { NoteSink } from '../lib/caller.js';
import { actorOf } from '../lib/operator.js';
import { privilegedRefused } from './containment.js';
import type { LxcContext } from './context.js';
import type { ContainerRecord } from './model.js';
import { checkNetwork } from './network.js';
import { hostnameOf, lxcNameOf } from './naming.js';

export class Containers {
  constructor(private readonly ctx: LxcContext) {}

  async list(): Promise<ResultOf<'lxc_list'>> {
    const recs = await this.ctx.records.all();
    return { containers: recs.map((r) => this.ctx.view(r, this.ctx.quickState(r))) };
  }

  async get(lxcid: number): Promise<ResultOf<'lxc_get'>> {
    const rec = await this.ctx.record(lxcid);
    return { container: this.ctx.view(rec, await this.ctx.state(rec)) };
  }

  /** The guests port: what system allocation and the proxy see. */
  async guests(): Promise<GuestInfo[]> {
    const recs = await this.ctx.records.all();
    return recs.map((r) => {
      const state = this.ctx.quickState(r);
      const running = state === 'running' || state === 'frozen';
      const addrs = new Set<string>();
      if (running) for (const a of this.ctx.driver.tools.network(lxcNameOf(r.lxcid))?.addresses ?? []) addrs.add(a);
      if (r.network.ip_address && r.network.type === 'bridged') addrs.add(r.network.ip_address.split('/')[0]);
      return { kind: 'lxc' as const, id: String(r.lxcid), name: r.name, state, running, cpu_cores: r.cpu_cores, memory_mb: r.memory_mb, addresses: [...addrs] };
    });
  }

  /** The usage port (metrics): each running container's figures from its cgroup files and namespace, no program run. */
  async usage(): Promise<ResourceUsage[]> {
    const recs = await this.ctx.records.all();
    const cg = this.ctx.driver.cgroups;
    const out: ResourceUsage[] = [];
    for (const r of recs) {
      const state = this.ctx.quickState(r);
      if (state !== 'running' && state !== 'frozen') continue;
      const name = lxcNameOf(r.lxcid);
      const cpuNs = cg.cpuUsageNs(name);
      const io = cg.ioBytes(name);
      const ifaces = this.ctx.driver.tools.network(name)?.interfaces ?? null;
      out.push({
        id: String(r.lxcid),
        cpu_seconds: cpuNs === null ? null : cpuNs / 1e9,
        memory_bytes: cg.memory(name).used_bytes,
        disk_read_bytes: io?.read_bytes ?? null,
        disk_written_bytes: io?.written_bytes ?? null,
        network_received_bytes: ifaces ? ifaces.reduce((n, i) => n + i.rx_bytes, 0) : null,
        network_transmitted_bytes: ifaces ? ifaces.reduce((n, i) => n + i.tx_bytes, 0) : null,
      });
    }
    return out;
  }

  /**
   * CPU and memory apply at once (to a running container through its
   * cgroups); the name, network and nesting go into the record and config at
   * once and into the rootfs at the next start (`restart_required`).
   */
  update(a: ArgsOf<'lxc_update'>, ctx: NoteSink): Promise<ResultOf<'lxc_update'>> {
    return this.ctx.onContainer(a.id, 'update', async (cur) => {
      const rec: ContainerRecord = structuredClone(cur);
      const changed: string[] = [];
      let needsSync = false;
      if (a.new_name !== undefined && a.new_name !== null && a.new_name !== cur.name) {
        rec.name = a.new_name;
        changed.push('name');
        if (hostnameOf(rec.name, rec.lxcid) !== hostnameOf(cur.name, cur.lxcid)) needsSync = true;
      }
      if (a.cpu_cores) {
        rec.cpu_cores = a.cpu_cores;
        changed.push('cpu_cores');
      }
      if (a.memory_mb) {
        rec.memory_mb = a.memory_mb;
        changed.push('memory_mb');
      }
      if (a.nesting !== undefined && a.nesting !== cur.nesting) {
        if (a.nesting && cur.privileged && !this.ctx.settings.allowPrivileged)
          throw privilegedRefused(`argument 'nesting' in privileged container ${cur.lxcid}`);
        rec.nesting = a.nesting;
        changed.push('nesting');
      }
      const net = rec.network;
      if (a.network_type !== undefined) net.type = a.network_type;
      if (a.network_bridge !== undefined) net.bridge = a.network_bridge || null;
      if (a.ip_address !== undefined && a.ip_address !== null) net.ip_address = a.ip_address === '' ? null : withPrefix(a.ip_address);
      if (a.gateway !== undefined && a.gateway !== null) net.gateway = a.gateway || null;
      if (a.dns_servers !== undefined && a.dns_servers !== null) net.dns_servers = [...a.dns_servers];
      if (JSON.stringify(net) !== JSON.stringify(cur.network)) {
        await checkNetwork(this.ctx, net);
        changed.push('network');
        needsSync = true;
      }
      const st = await this.ctx.state(cur);
      if (changed.length === 0) return { container: this.ctx.view(cur, st), restart_required: false };
      const apply = async () => {
        if (needsSync) rec.rootfs_sync_pending = true;
        rec.updated_at = this.ctx.now();
        await this.ctx.records.put(rec);
        await this.ctx.writeConfig(rec);
        if (st === 'running' || st === 'frozen') {
          await this.ctx.driver.tools.setLimits(lxcNameOf(rec.lxcid), {
            cpuCores: changed.includes('cpu_cores') ? rec.cpu_cores : undefined,
            memoryMb: changed.includes('memory_mb') ? rec.memory_mb : undefined,
          });
        }
      };
      if (rec.name !== cur.name) {
        await this.ctx.lock.exclusive([`name:${rec.name.toLowerCase()}`], 'rename', async () => {
          await this.ctx.ensureNameFree(rec.name, rec.lxcid);
          await apply();
        });
      } else {
        await apply();
      }
      const restartRequired = st !== 'stopped' && (needsSync || changed.includes('nesting'));
      ctx.note({ summary: `Updated container ${a.id} '${rec.name}' (${changed.join(', ')})`, target: `lxc/${a.id}`, metadata: { changed } });
      return { container: this.ctx.view(rec, st), restart_required: restartRequired };
    });
  }

  async delete(lxcid: number, ctx: NoteSink & { caller?: { tokenName: string } }): Promise<ResultOf<'lxc_delete'>> {
    await this.ctx.require(['lxc-info']);
    return this.ctx.onContainer(lxcid, 'delete', async (rec) => {
      const st = await this.ctx.state(rec);
      if (st !== 'stopped') throw conflict(`container ${lxcid} is ${st}; stop it first`);
      const p = this.ctx.paths(rec);
      const confDir = this.ctx.driver.tools.confDir(lxcNameOf(lxcid));
      await this.ctx.records.journalVia(this.ctx.states.committing(lxcid, 'deleted', actorOf(ctx))).run(
        `delete:${lxcid}`,
        { op: 'delete', lxcid, dir: p.dir, confDir, zfs_dataset: rec.zfs_dataset },
        async () => {
          await this.ctx.removeContainerFiles(p.dir, lxcid, rec.zfs_dataset);
        },
        { commit: () => this.ctx.records.delOps(lxcid) },
      );
      ctx.note({ summary: `Deleted container ${lxcid} '${rec.name}'`, target: `lxc/${lxcid}` });
      return { deleted: true as const, lxcid, name: rec.name };
    });
  }
}
