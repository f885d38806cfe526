/**
 * What the system domain's operations share: the pools, the host probe, and
 * what the other domains report (their guests, their runtimes).
 */
import type { PoolConfig } from '../config.js';
import type { DomainInfo } from '../domain.js';
import type { HostProbe } from './driver.js';
import { diskUsedPercent, type PoolUsage } from './views.js';

/** What the allocation sums need of a guest (the domains that own guests report them). */
export interface GuestLoad {
  kind: 'vm' | 'lxc' | 'app' | 'sandbox';
  cpu_cores: number;
  memory_mb: number;
  running: boolean;
}

export interface SystemContextOptions {
  nodeId: string;
  nodeName: string;
  /** The guests the VM, sandbox and LXC domains run (none when omitted). */
  guests?: () => Promise<GuestLoad[]>;
  /** What the domains of this build say about themselves (none when omitted). */
  domains?: () => Promise<DomainInfo[]>;
}

export class SystemContext {
  constructor(
    readonly pools: PoolConfig[],
    readonly probe: HostProbe,
    readonly opts: SystemContextOptions,
  ) {}

  /** Each pool's file system figures; a pool that cannot be read says why instead. */
  poolUsage(): Promise<PoolUsage[]> {
    return Promise.all(
      this.pools.map(async (p): Promise<PoolUsage> => {
        try {
          const d = await this.probe.diskUsage(p.path);
          return { storage_id: p.id, path: p.path, total_bytes: d.total_bytes, available_bytes: d.available_bytes, used_percent: diskUsedPercent(d) };
        } catch (err) {
          const e = err as NodeJS.ErrnoException;
          const error = e?.code === 'ENOENT' ? 'pool directory does not exist' : `cannot read pool: ${e?.message ?? String(err)}`;
          return { storage_id: p.id, path: p.path, total_bytes: null, available_bytes: null, used_percent: null, error };
        }
      }),
    );
  }
}
