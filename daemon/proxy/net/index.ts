/**
 * The proxy's AddressDriver: floating addresses with iproute2 and iputils
 * arping (vip.ts), guarded by a process that hands them off when hostd dies.
 */
import { ProbeCache, type Availability } from '../../lib/availability.js';
import type { AddressDriver, AddressGuard, FloatingAddresses } from '../driver.js';
import { claimVip, dropParked, handoffVip, ifaceExists, parkable, probeVip, releaseVip, startGuard } from './vip.js';

export class IpAddresses implements AddressDriver {
  private readonly probe = new ProbeCache(probeVip);

  availability(opts?: { fresh?: boolean }): Promise<Availability[]> {
    return this.probe.get(opts);
  }

  interfaceExists(iface: string): Promise<boolean> {
    return ifaceExists(iface);
  }

  guard(a: FloatingAddresses, holdSeconds: number): AddressGuard {
    const g = startGuard(a.iface, a.cidrs, holdSeconds);
    return {
      async disarm() {
        if (g.exitCode !== null || g.signalCode !== null) return;
        const gone = new Promise<void>((r) => g.once('exit', () => r()));
        g.kill('SIGUSR1');
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([gone, new Promise<void>((r) => (timer = setTimeout(r, 2000)))]);
        clearTimeout(timer);
      },
    };
  }

  claim(a: FloatingAddresses): Promise<void> {
    return claimVip(a);
  }

  handOff(a: FloatingAddresses): Promise<string[]> {
    return handoffVip(a.iface, a.cidrs);
  }

  dropParked(addrs: string[]): Promise<void> {
    return dropParked(addrs);
  }

  async remove(a: FloatingAddresses): Promise<void> {
    await releaseVip(a);
    await dropParked(parkable(a.cidrs));
  }
}
