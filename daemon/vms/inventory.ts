/** What VMs there are: the views of /vms, the guests port (GET /system/allocation, the proxy), and VM documentation. */
import type { GuestInfo } from '../domain.js';
import { nextDocs } from '../lib/docs.js';
import type { NoteSink } from '../lib/caller.js';
import { vmKey } from './records.js';
import { now } from './common.js';
import { type OwnerOpts, TEMPLATE_BUILD_OWNER, type VmContext, type VmView } from './context.js';

export class VmInventory {
  constructor(private readonly c: VmContext) {}

  // ------------------------------------------------------------ reads

  async list(o: OwnerOpts = {}): Promise<VmView[]> {
    const out: VmView[] = [];
    for (const rec of await this.c.records.allVms()) {
      if ((rec.owner ?? null) !== (o.owner ?? null)) continue;
      out.push(await this.c.viewOf(rec));
    }
    return out;
  }

  async get(vmid: number, o: OwnerOpts = {}): Promise<VmView> {
    return this.c.viewOf(await this.c.vm(vmid, o));
  }

  async listOwned(owner: string): Promise<VmView[]> {
    return this.list({ owner });
  }

  /** A VM as the system and proxy domains see it. */
  async guestInfo(vmid: number): Promise<GuestInfo | null> {
    const rec = await this.c.records.vm(vmid);
    if (!rec) return null;
    const state = await this.c.state(rec);
    let addresses: string[] = [];
    if (rec.cloud_init.network_type === 'bridged') {
      if (rec.cloud_init.ip_address) addresses = [rec.cloud_init.ip_address.split('/')[0]];
      else if (state === 'running') {
        const c = this.c.addrCache.get(vmid);
        if (c && Date.now() - c.at < 30_000) addresses = c.addresses;
        else {
          try {
            addresses = (await this.c.driver.addresses(this.c.ref(vmid), 500)).map((x) => x.address);
            this.c.addrCache.set(vmid, { at: Date.now(), addresses });
          } catch {
            addresses = [];
          }
        }
      }
    }
    return {
      kind: rec.owner === 'sandbox' ? 'sandbox' : 'vm',
      id: String(vmid),
      name: rec.name,
      state,
      running: state === 'running' || state === 'paused',
      cpu_cores: rec.cpu_cores,
      memory_mb: rec.memory_mb,
      addresses,
    };
  }

  /** The guests port: VMs of /vms and template builds (owned VMs are reported by their owner). */
  async guests(): Promise<GuestInfo[]> {
    const out: GuestInfo[] = [];
    for (const v of await this.c.records.allVms()) {
      if (v.owner !== null && v.owner !== TEMPLATE_BUILD_OWNER) continue;
      const g = await this.guestInfo(v.vmid);
      if (g) out.push(g);
    }
    return out;
  }

  // ------------------------------------------------------------ docs

  async docsGet(vmid: number, o: OwnerOpts = {}) {
    await this.c.vm(vmid, o);
    const d = (await this.c.records.docs.get(vmKey(vmid))) ?? null;
    return { vmid, content: d?.content ?? '', updated_at: d?.updated_at ?? null };
  }

  async docsSet(vmid: number, content: string, append: boolean, ctx: NoteSink, o: OwnerOpts = {}) {
    return this.c.lock.run([`docs:${vmid}`], async () => {
      const rec = await this.c.vm(vmid, o);
      const t = now();
      const next = nextDocs((await this.c.records.docs.get(vmKey(vmid)))?.content ?? '', content, append, t);
      await this.c.records.docs.put(vmKey(vmid), { content: next, updated_at: t });
      ctx.note({
        summary: `Documentation of VM ${vmid} '${rec.name}' ${append ? 'appended to' : 'replaced'}`,
        target: `vms/${vmid}/docs`,
        metadata: { vmid, append, bytes: Buffer.byteLength(content) },
      });
      return { vmid, content: next, updated_at: t };
    });
  }
}
