/**
 * The guests port (for the proxy and the system domain): every app, its state
 * and the host addresses its published ports are reached on. Never fails: an
 * engine that does not answer makes every app's state `unknown`.
 */
import type { GuestInfo } from '../domain.js';
import { ensureAvailable } from '../lib/availability.js';
import type { AppsContext } from './context.js';
import { ENGINE, type ContainerSummary } from './driver.js';
import { view } from './views.js';

export async function appGuests(c: AppsContext): Promise<GuestInfo[]> {
  let cs: ContainerSummary[] | null = null;
  try {
    await ensureAvailable(c.driver, [ENGINE]);
    cs = await c.driver.containers({});
  } catch {
    cs = null;
  }
  return c.records.all().map((r) => {
    const v = view(c, r, cs);
    // A wildcard bind is reached on loopback.
    const addresses = [
      ...new Set(
        v.ports.map(
          (p) =>
            `${p.host_ip === '' || p.host_ip === '0.0.0.0' ? '127.0.0.1' : p.host_ip === '::' ? '[::1]' : p.host_ip.includes(':') ? `[${p.host_ip}]` : p.host_ip}:${p.host_port}`,
        ),
      ),
    ];
    return {
      kind: 'app' as const,
      id: r.app_id,
      name: r.name,
      state: v.state,
      running: v.state === 'running' || v.state === 'partial',
      cpu_cores: 0,
      memory_mb: 0,
      addresses,
    };
  });
}
