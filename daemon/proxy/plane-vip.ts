/**
 * The floating addresses on this node, as the data plane claims and releases
 * them: claimed only while this node serves the proxy, after no other host
 * answers for them; released first when the lease goes (Caddy's servers
 * before the address, so that clients still sent here are refused at once,
 * never served by two nodes). Both go through the intent journal, and a
 * guard armed before the claim hands them off if hostd dies.
 */
import { errorBody } from '../lib/errors.js';
import { SerialQueue } from '../lib/serial.js';
import type { ProxyVip } from './config.js';
import type { ProxyContext } from './context.js';
import type { AddressGuard, FloatingAddresses } from './driver.js';
import type { Incidents } from './incidents.js';
import type { CaddyPlane } from './plane-caddy.js';

/** The addresses of a `vip` setting as `addr/prefix`, the IPv4 one first. */
export function addressesOf(v: ProxyVip): FloatingAddresses {
  const cidrs = [`${v.vip}/${v.vip_prefix}`];
  if (v.vip6) cidrs.push(`${v.vip6}/${v.vip6_prefix ?? 64}`);
  return { iface: v.vip_iface, cidrs };
}

const keyOf = (a: FloatingAddresses): string => `${a.iface}|${a.cidrs.join('|')}`;

export interface VipState {
  claimed: boolean;
  iface: string | null;
  cidrs: string[];
  error: string | null;
}

export class VipPlane {
  private claimed: { a: FloatingAddresses; key: string } | null = null;
  private guard: AddressGuard | null = null;
  private error: string | null = null;
  private readonly queue = new SerialQueue();

  constructor(
    private readonly ctx: ProxyContext,
    private readonly caddy: CaddyPlane,
    private readonly incidents: Incidents,
  ) {}

  state(): VipState {
    return { claimed: !!this.claimed, iface: this.claimed?.a.iface ?? null, cidrs: this.claimed?.a.cidrs ?? [], error: this.error };
  }

  /** Claims `v` on this node (which serves the proxy), or releases what it holds when `v` changed or is gone. */
  reconcile(v: ProxyVip | null): Promise<void> {
    return this.queue.run(async () => {
      const want = v ? addressesOf(v) : null;
      if (this.claimed && (!want || this.claimed.key !== keyOf(want))) await this.releaseNow();
      if (!want || this.claimed) return;
      const { addresses } = this.ctx.drivers;
      const gone = (await addresses.availability()).find((a) => !a.available);
      if (gone) {
        this.error = gone.reason;
        return;
      }
      // Lost the lease while waiting for this queue: claim nothing.
      if (!this.ctx.serving()) return;
      const { records, pause, settings } = this.ctx;
      // The guard is armed before the address is added: hostd may die the moment it is up.
      const guard = addresses.guard(want, Math.ceil(settings.handoffMs / 1000));
      try {
        await records.journal.run(
          'vip',
          { kind: 'vip-add', iface: want.iface, cidrs: want.cidrs },
          async () => {
            await addresses.claim(want);
            await pause('vip-claimed');
          },
          {
            commit: () => [records.putVip(want)],
            rollback: () => addresses.remove(want),
          },
        );
      } catch (err) {
        void guard.disarm();
        const { status, body } = errorBody(err);
        if (this.error !== body.error && status === 409) await this.incidents.capture('vip_conflict', body.error, { vip: v });
        this.error = body.error;
        return;
      }
      this.error = null;
      this.claimed = { a: want, key: keyOf(want) };
      this.guard = guard;
      this.ctx.log.info({ iface: want.iface, cidrs: want.cidrs }, 'floating addresses claimed');
    });
  }

  /** Releases the addresses this node holds (or a recorded claim); at close, the parked copies go at once. */
  release(closing = false): Promise<void> {
    return this.queue.run(() => this.releaseNow(closing));
  }

  private async releaseNow(closing = false): Promise<void> {
    const { records, drivers, settings } = this.ctx;
    const c = this.claimed?.a ?? (await records.vip()) ?? null;
    if (!c) return;
    // No longer the holder: Caddy's servers go before the address is parked on lo, so that
    // clients still sent here are refused at once, never served by two nodes.
    if (!this.ctx.serving() && drivers.caddy.running()) await drivers.caddy.unserve(await this.caddy.caRoot());
    const parked = await records.journal.run('vip', { kind: 'vip-del', iface: c.iface, cidrs: c.cidrs }, () => drivers.addresses.handOff(c), {
      commit: (p) => [records.delVip(), records.putParked(p)],
    });
    this.claimed = null;
    const g = this.guard;
    this.guard = null;
    await g?.disarm();
    this.ctx.log.info({ iface: c.iface, cidrs: c.cidrs, parked }, 'floating addresses released');
    if (closing) await this.dropParked(parked);
    else {
      const t = setTimeout(() => void this.queue.run(() => this.dropParked(parked)).catch(() => undefined), settings.handoffMs);
      t.unref();
    }
  }

  private async dropParked(addrs: string[]): Promise<void> {
    // A claim since then took the address back: its own claim removed the parked copy.
    if (this.claimed) return;
    await this.ctx.drivers.addresses.dropParked(addrs);
    await this.ctx.records.state.del('parked');
  }
}
