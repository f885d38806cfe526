/**
 * The LXC service, one part per resource or concern, each holding the
 * domain's context (context.ts) and nothing of the others: handlers.ts maps
 * each operation to one of them.
 */
import { Containers } from './containers.js';
import type { LxcContext } from './context.js';
import { Create } from './create.js';
import { Disk } from './disk.js';
import { Docs } from './docs.js';
import { Exec } from './exec.js';
import { HostStatusReader } from './host-status.js';
import { Images } from './images.js';
import { Lifecycle } from './lifecycle.js';
import { Move } from './move.js';
import { Recovery } from './recovery.js';
import { StatsReader } from './stats.js';
import { Templates } from './templates.js';

export interface LxcServices {
  /** list, get, update, delete; the guests port */
  containers: Containers;
  /** create, clone */
  create: Create;
  /** start, stop, restart, freeze, unfreeze */
  lifecycle: Lifecycle;
  /** the disk limit */
  disk: Disk;
  /** the rootfs to another pool */
  move: Move;
  exec: Exec;
  stats: StatsReader;
  docs: Docs;
  /** list, catalog, download, import, delete, move */
  images: Images;
  /** capture a container as an image */
  templates: Templates;
  hostStatus: HostStatusReader;
  /** settle intents, reconcile at open */
  recovery: Recovery;
}

export function lxcServices(ctx: LxcContext): LxcServices {
  return {
    containers: new Containers(ctx),
    create: new Create(ctx),
    lifecycle: new Lifecycle(ctx),
    disk: new Disk(ctx),
    move: new Move(ctx),
    exec: new Exec(ctx),
    stats: new StatsReader(ctx),
    docs: new Docs(ctx),
    images: new Images(ctx),
    templates: new Templates(ctx),
    hostStatus: new HostStatusReader(ctx),
    recovery: new Recovery(ctx),
  };
}
