/**
 * The locations domain: SMB shares connected and mounted under the data dir,
 * with their passwords in the secret store. It provides the `connections`
 * port, through which the folders domain reaches a mounted share.
 *
 * Opening: the records are loaded, every change a crash interrupted is
 * settled before any call is served, then mounts come back in the
 * background and the monitor checks them every `check_interval_seconds`.
 */
import path from 'node:path';
import type { Logger } from 'pino';
import { opsOf } from '../../api/registry/index.js';
import { defineDomain, type EventsPort } from '../domain.js';
import { OPERATOR } from '../lib/operator.js';
import { Periodic } from '../lib/periodic.js';
import { IntentRecovery } from '../lib/recovery.js';
import type { SecretStore } from '../lib/secrets.js';
import { testPause } from '../lib/test-pause.js';
import type { Store } from '../store/store.js';
import { LocationsContext } from './context.js';
import type { LocationsDriver } from './driver.js';
import { locationHandlers } from './handlers.js';
import { monitorPass, restoreMounts } from './monitor.js';
import { LocationRecords, type Intent } from './records.js';
import { describeIntent, loadRecords, settle, tidyAfterRestart } from './recovery.js';
import { mountDir } from './service.js';
import { parseSettings, type LocationsSettings } from './settings.js';
import { SmbDriver } from './smb/index.js';
import { baseline, reportAll, storeChange } from './state-events.js';
import { hostStatus, statuses } from './view.js';

export interface StartDeps {
  store: Store;
  driver: LocationsDriver;
  secrets: SecretStore;
  log: Logger;
  settings: LocationsSettings;
  dataDir: string;
  env: Readonly<Record<string, string | undefined>>;
  /** Where `locations.state` events go; none when absent (the service tests). */
  events?: EventsPort;
}

const noEvents: EventsPort = { publishState: async () => undefined };

/**
 * Everything of an open but the background work: the context, with the
 * records loaded and every interrupted change settled or pending. (The
 * service tests start the domain this way on a fake driver.)
 */
export async function startLocations(d: StartDeps): Promise<LocationsContext> {
  const records = new LocationRecords(d.store);
  // settle() runs inside recovery.run() below, once `c` exists.
  const recovery: IntentRecovery<Intent> = new IntentRecovery<Intent>({
    domain: 'locations',
    // A settled change is committed with its state event, as the operator's (nobody's call is answered for it).
    journal: records.journalVia({ batch: (ops) => storeChange(c, ops, OPERATOR) }),
    log: d.log,
    settle: (key, intent) => settle(c, key, intent),
    describe: describeIntent,
  });
  const c: LocationsContext = new LocationsContext({
    records,
    driver: d.driver,
    secrets: d.secrets,
    log: d.log,
    settings: d.settings,
    root: path.join(d.dataDir, 'locations'),
    pause: testPause(d.env, 'locations', d.log),
    recovery,
    events: d.events ?? noEvents,
  });
  await loadRecords(c);
  // What was last reported (stored with each event): what recovery and the tidy-up store is compared with it.
  await baseline(c);
  await recovery.run();
  await tidyAfterRestart(c);
  // A record a version that stored records before their events left without its event.
  await reportAll(c);
  return c;
}

export const locationsDomain = defineDomain({
  name: 'locations',
  ops: opsOf('locations'),
  async open(deps) {
    const settings = parseSettings(deps.settings);
    const driver = new SmbDriver(settings.mountRoute);
    const c = await startLocations({
      store: deps.store,
      driver,
      secrets: deps.secrets,
      log: deps.log,
      settings,
      dataDir: deps.config.dataDir,
      env: deps.env,
      events: deps.events,
    });
    const status = await driver.status();
    deps.log.info({ mount_route: status.mount_route, reason: status.route_reason }, 'locations: mount route');
    const monitor = new Periodic(
      () => monitorPass(c),
      (err) => deps.log.warn({ err }, 'locations: monitor failed'),
    );
    // Mounts come back in the background: a share that is slow to answer must not hold up the start.
    void restoreMounts(c).finally(() => monitor.start(settings.checkIntervalMs));
    return {
      handlers: locationHandlers(c),
      info: async () => ({ name: 'locations', built: true, runtimes: await driver.availability() }),
      close: async () => {
        monitor.stop();
        c.closed = true;
      },
      provides: { connections: { mountDir: (id) => mountDir(c, id) }, mountStates: { statuses: () => statuses(c) } },
      admin: {
        'GET /admin/locations/host-status': async () => [200, await hostStatus(c)],
      },
    };
  },
});
