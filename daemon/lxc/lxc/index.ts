/** The LXC driver on the real programs: lxc-* tools, cgroup files, tar, e2fsprogs, ZFS. */
import type { Logger } from 'pino';
import type { PoolConfig } from '../../config.js';
import type { LxcDriver } from '../driver.js';
import type { LxcSettings } from '../settings.js';
import { CgroupReader, readCgroupLayout } from './cgroups.js';
import { probeHost } from './host.js';
import { ImageStore } from './images.js';
import { Storage } from './storage.js';
import { LxcTools } from './tools.js';
import { Zfs } from './zfs.js';

export function createLxcDriver(settings: LxcSettings, pools: PoolConfig[], log: Logger): LxcDriver {
  const cgroups = new CgroupReader(readCgroupLayout());
  return {
    tools: new LxcTools(settings.lxcPath, cgroups),
    cgroups,
    storage: new Storage(log),
    images: new ImageStore(pools),
    zfs: new Zfs(),
    probe: () => probeHost(settings.idmap),
  };
}
