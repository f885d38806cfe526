/**
 * The LXC domain: containers on the host's LXC (liblxc through the lxc-*
 * tools), their template images on the storage pools, and the `guests` port
 * through which system allocation and the proxy see them.
 *
 * open(): settles intents a crash left open, clears work dirs, renders every
 * container's config from its record, and once per host boot starts the
 * containers marked autostart. Closing stops nothing: containers outlive the
 * daemon.
 */
import fs from 'node:fs';
import { opsOf } from '../../api/registry/index.js';
import { defineDomain } from '../domain.js';
import { createLxcDriver } from './lxc/index.js';
import { lxcHandlers } from './handlers.js';
import { LxcRecords } from './records.js';
import { LxcService } from './service.js';
import { parseSettings } from './settings.js';

function bootId(env: NodeJS.ProcessEnv): string {
  // Test hook: a test simulates a host reboot by changing this.
  if (env.HOSTD_TEST_LXC_BOOT_ID) return env.HOSTD_TEST_LXC_BOOT_ID;
  try {
    return fs.readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown';
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
    const svc = new LxcService({
      records: new LxcRecords(deps.store),
      driver,
      settings,
      pools: deps.config.pools,
      tasks: deps.tasks,
      log,
      folders: () => deps.ports.all('folders')[0]?.list() ?? [],
      dataDir: deps.config.dataDir,
      env: deps.env,
    });
    const probe = await svc.probe(true);
    const settled = await svc.recover();
    svc.pruneCgroups();
    if (settled) log.warn({ settled }, 'lxc: settled intents left open by the last run');
    await svc.syncConfigs();
    const lxc = probe.programs.find((p) => p.name === 'lxc-start');
    if (!lxc?.available) log.warn({ reason: lxc?.reason }, 'lxc: LXC is not available; container operations answer 503');
    else svc.startAutostart(bootId(deps.env));
    return {
      handlers: lxcHandlers(svc),
      info: async () => ({ name: 'lxc', built: true, runtimes: (await svc.probe()).programs }),
      close: () => svc.close(),
      provides: { guests: { guests: () => svc.guests() } },
      admin: {
        'POST /admin/lxc/images/import': async (body) => [201, await svc.imagesImport(body)],
      },
    };
  },
});
