/**
 * The LXC domain: containers on the host's LXC (liblxc through the lxc-*
 * tools, driven by lxc-tools/), their template images on the storage pools,
 * and the `guests` port through which system allocation and the proxy see
 * them.
 *
 * open(): settles the changes a crash left open and reconciles (work dirs,
 * mount staging, every config rendered from its record) before it serves a
 * call, removes cgroup directories nothing uses, and once per host boot
 * starts the containers marked autostart; it watches the containers (the
 * driver's lxc-monitor) for `lxc.state` events, after reporting once what
 * changed while the daemon was down. Closing stops the watch and nothing
 * else: containers outlive the daemon.
 */
import fs from 'node:fs';
import { opsOf } from '../../api/registry/index.js';
import { defineDomain } from '../domain.js';
import { IntentRecovery } from '../lib/recovery.js';
import { autostart, bootId } from './autostart.js';
import type { LxcDriver, StateWatch } from './driver.js';
import { lxcHandlers } from './handlers.js';
import { createLxcDriver } from './lxc-tools/index.js';
import { LxcRecords, type Intent } from './records.js';
import { lxcServices } from './services.js';
import { lxcContext } from './states.js';
import { parseSettings } from './settings.js';

/**
 * Removes this hostd's cgroup directories that nothing uses (LXC leaves the
 * group's own directory in every hierarchy, a crash may leave more); those of
 * running containers stay.
 */
function pruneCgroups(driver: LxcDriver, log: { info(o: object, m: string): void; warn(o: object, m: string): void }): void {
  try {
    const removed = driver.cgroups.pruneGroup();
    if (removed.length) log.info({ removed: removed.length }, 'lxc: removed unused cgroup directories');
  } catch (err) {
    log.warn({ err }, 'lxc: cannot remove unused cgroup directories');
  }
}

export const lxcDomain = defineDomain({
  name: 'lxc',
  ops: opsOf('lxc'),
  async open(deps) {
    const settings = parseSettings(deps.settings, deps.config);
    const log = deps.log.child({ domain: 'lxc' });
    fs.mkdirSync(settings.lxcPath, { recursive: true, mode: 0o711 });
    const driver = createLxcDriver(settings, deps.config.pools, log);
    const records = new LxcRecords(deps.store);
    const ctx = lxcContext({
      records,
      driver,
      settings,
      pools: deps.config.pools,
      tasks: deps.tasks,
      log,
      folders: () => deps.ports.all('folders')[0]?.list() ?? [],
      dataDir: deps.config.dataDir,
      env: deps.env,
      events: deps.events,
    });
    const services = lxcServices(ctx);
    const recovery = new IntentRecovery<Intent>({
      domain: 'lxc',
      journal: records.journal,
      log,
      settle: (_key, intent) => services.recovery.settle(intent),
      reconcile: () => services.recovery.reconcile(),
      describe: (intent) => services.recovery.describe(intent),
    });
    await recovery.run();
    pruneCgroups(driver, log);
    let background: Promise<void> = Promise.resolve();
    let watch: StateWatch | null = null;
    const lxc = (await driver.availability()).find((p) => p.name === 'lxc-start');
    if (!lxc?.available) log.warn({ reason: lxc?.reason }, 'lxc: LXC is not available; container operations answer 503');
    else {
      // Watching first, then comparing: a change between the two is seen by one of them (reported once either way).
      watch = await driver.watchStates(
        (s) => ctx.states.observe(s),
        () => {
          ctx.states.checkAll('watch').catch((err) => log.warn({ err }, 'lxc: state check after the watch restarted failed'));
        },
      );
      await ctx.states.checkAll('open');
      background = autostart(ctx, services.lifecycle, bootId(deps.env)).catch((err) => log.error({ err }, 'lxc: autostart pass failed'));
    }
    return {
      handlers: lxcHandlers(services),
      info: async () => ({ name: 'lxc', built: true, runtimes: await driver.availability() }),
      close: async () => {
        await background;
        await watch?.stop();
        await ctx.states.idle();
        pruneCgroups(driver, log);
      },
      provides: { guests: { guests: () => services.containers.guests() }, usage: { kind: 'lxc', usage: () => services.containers.usage() } },
      admin: {
        'POST /admin/lxc/images/import': async (body) => [201, await services.images.import(body)],
      },
    };
  },
});
