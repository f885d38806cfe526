/**
 * GET /system/allocation: what the guests of the other domains hold against
 * the host's capacity. Sandboxes are VMs; apps hold no reserved CPU or memory.
 */
import type { GuestLoad, SystemContext } from './context.js';
import type { AllocationReport } from './views.js';

export async function allocation(c: SystemContext): Promise<AllocationReport> {
  const [memory, pools, guests] = await Promise.all([c.probe.memory(), c.poolUsage(), c.opts.guests?.() ?? []]);
  const vmGuests = guests.filter((g) => g.kind === 'vm' || g.kind === 'sandbox');
  const ctGuests = guests.filter((g) => g.kind === 'lxc');
  const all = [...vmGuests, ...ctGuests];
  const sum = (gs: GuestLoad[], k: 'cpu_cores' | 'memory_mb') => gs.reduce((n, g) => n + g[k], 0);
  const running = all.filter((g) => g.running);

  const capacity = { cpu_cores: c.probe.cpu().cores, memory_mb: Math.floor(memory.total_bytes / (1024 * 1024)) };
  const allocated = { cpu_cores: sum(all, 'cpu_cores'), memory_mb: sum(all, 'memory_mb') };
  // Over 1 when overcommitted; 0 when the capacity is unknown.
  const ratio = (a: number, cap: number) => (cap > 0 ? Math.round((a / cap) * 10000) / 10000 : 0);

  return {
    capacity,
    allocated: {
      ...allocated,
      vms: { count: vmGuests.length, running: vmGuests.filter((g) => g.running).length },
      containers: { count: ctGuests.length, running: ctGuests.filter((g) => g.running).length },
    },
    running: { cpu_cores: sum(running, 'cpu_cores'), memory_mb: sum(running, 'memory_mb') },
    ratio: { cpu: ratio(allocated.cpu_cores, capacity.cpu_cores), memory: ratio(allocated.memory_mb, capacity.memory_mb) },
    pools,
  };
}
