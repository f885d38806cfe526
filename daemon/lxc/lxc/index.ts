/** The LXC driver on the real programs: lxc-* tools, cgroup files, tar, e2fsprogs, ZFS. */
import crypto from 'node:crypto';
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

/** The cgroup group of one lxcpath: containers of two hostd instances never share a cgroup. */
export function cgroupGroup(lxcPath: string): string {
  return `hostd-${crypto.createHash('sha256').update(lxcPath).digest('hex').slice(0, 10)}`;
}

export function createLxcDriver(settings: LxcSettings, pools: PoolConfig[], log: Logger): LxcDriver {
  const group = cgroupGroup(settings.lxcPath);
  const cgroups = new CgroupReader(readCgroupLayout(), (name) => `${group}/ct-${name.replace(/^svc-lxc-/, '')}`, group);
  return {
    tools: new LxcTools(settings.lxcPath, cgroups),
    cgroups,
    storage: new Storage(log),
    images: new ImageStore(pools),
    zfs: new Zfs(),
    probe: () => probeHost(settings.idmap),
    cgroupDirs: (lxcid) => ({ container: `${group}/ct-${lxcid}`, monitor: `${group}/mon-${lxcid}` }),
  };
}
