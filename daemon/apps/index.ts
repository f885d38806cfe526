/**
 * The apps domain: compose projects on the Docker engine, installed from
 * templates or custom compose content (docs/apps.md). open() composes the
 * Docker driver, the records, the shared context and the operation files,
 * settles what a restart interrupted, and only then serves. It watches the
 * engine's events for hostd's app containers (`apps.state` events), after
 * reporting once what changed while the daemon was down.
 */
import fs from 'node:fs';
import path from 'node:path';
import { opsOf } from '../../api/registry/index.js';
import { defineDomain } from '../domain.js';
import { IntentRecovery } from '../lib/recovery.js';
import { testPause } from '../lib/test-pause.js';
import type { AppsContext, AppsContextDeps } from './context.js';
import { appsContext } from './states.js';
import { DockerDriver } from './docker/driver.js';
import { appGuests } from './guests.js';
import { appsUsage } from './stats.js';
import { appsHandlers } from './handlers.js';
import { AppRecords, type AppIntent } from './records.js';
import { describeIntent, settleIntent } from './recovery.js';
import { audit } from './refusals.js';
import { parseSettings } from './settings.js';
import { TemplateCatalog } from './templates.js';

/**
 * The context over its dependencies, with start-up recovery run: interrupted
 * changes are settled (or left pending with why, when the engine or compose
 * is missing), and apps whose stored file breaks a rule added since are
 * logged. What open() serves; the unit tests open it over a fake driver.
 */
export async function openApps(deps: Omit<AppsContextDeps, 'recovery'>): Promise<AppsContext> {
  const recovery: IntentRecovery<AppIntent> = new IntentRecovery<AppIntent>({
    domain: 'apps',
    journal: deps.records.journal,
    log: deps.log,
    settle: (_key, intent) => settleIntent(c, intent),
    describe: describeIntent,
  });
  const c = appsContext({ ...deps, recovery });
  await recovery.run();
  await audit(c).catch((err) => deps.log.warn({ err: (err as Error).message }, 'apps: could not check the stored compose files'));
  return c;
}

export const appsDomain = defineDomain({
  name: 'apps',
  ops: opsOf('apps'),
  async open(deps) {
    const settings = parseSettings(
      deps.settings,
      deps.env,
      deps.config.pools.map((p) => p.id),
    );
    const composeRoot = path.join(deps.config.dataDir, 'apps');
    fs.mkdirSync(composeRoot, { recursive: true, mode: 0o700 });
    const driver = new DockerDriver({
      dockerHost: settings.dockerHost,
      composeBinary: settings.composeBinary,
      env: deps.env,
      configDir: path.join(composeRoot, '.docker'),
    });
    const records = new AppRecords(deps.store);
    await records.load();
    const log = deps.log.child({ domain: 'apps' });
    const c = await openApps({
      driver,
      records,
      catalog: new TemplateCatalog(settings.templatesDir),
      pools: deps.config.pools,
      folders: () => deps.ports.get('folders'),
      tasks: deps.tasks,
      log,
      dataDir: deps.config.dataDir,
      settings,
      pause: testPause(deps.env, 'apps', log),
      events: deps.events,
    });
    // Watching first, then comparing: a change between the two is seen by one of them (reported once either way).
    const watch = driver.watch(
      (s) => c.states.observe(s),
      () => {
        c.states.checkAll('watch').catch((err) => log.warn({ err }, 'apps: state check after the engine watch reopened failed'));
      },
      log,
    );
    await c.states.checkAll('open');
    return {
      handlers: appsHandlers(c),
      info: async () => ({ name: 'apps', built: true, runtimes: await driver.availability() }),
      close: async () => {
        await watch.stop();
        await c.states.idle();
      },
      provides: { guests: { guests: () => appGuests(c) }, usage: { kind: 'app', usage: () => appsUsage(c) } },
    };
  },
});
