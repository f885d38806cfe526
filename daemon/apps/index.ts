/**
 * The apps domain: compose projects on the Docker engine, installed from
 * templates or custom compose content. Config section `apps:` (all optional):
 *
 *   apps:
 *     docker_host: unix:///var/run/docker.sock   # else DOCKER_HOST, else the system socket
 *     compose_binary: /usr/local/lib/docker/cli-plugins/docker-compose
 *     templates_dir: /etc/hostd/app-templates    # relative to the config file
 *     publish_address: 0.0.0.0                   # where templates publish their ports
 *     default_storage_id: main                   # pool for apps installed without storage_id
 */
import fs from 'node:fs';
import path from 'node:path';
import net from 'node:net';
import { opsOf } from '../../api/registry/index.js';
import { defineDomain } from '../domain.js';
import { DockerDriver } from './docker/driver.js';
import { appsHandlers } from './handlers.js';
import { AppRecords } from './records.js';
import { AppsService, type AppsSettings } from './service.js';
import { TemplateCatalog } from './templates.js';

const KEYS = ['docker_host', 'compose_binary', 'templates_dir', 'publish_address', 'default_storage_id'];

/** Validates the `apps:` section; relative paths are taken relative to the config file. */
export function parseSettings(raw: unknown, env: NodeJS.ProcessEnv, poolIds: string[]): AppsSettings {
  if (raw === undefined || raw === null) return { publishAddress: '0.0.0.0' };
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new Error('config: apps must be a mapping');
  const m = raw as Record<string, unknown>;
  for (const k of Object.keys(m)) if (!KEYS.includes(k)) throw new Error(`config: unknown key apps.${k} (known: ${KEYS.join(', ')})`);
  const str = (k: string): string | undefined => {
    const v = m[k];
    if (v === undefined || v === null) return undefined;
    if (typeof v !== 'string' || !v) throw new Error(`config: apps.${k} must be a non-empty string`);
    return v;
  };
  const base = env.HOSTD_CONFIG ? path.dirname(path.resolve(env.HOSTD_CONFIG)) : process.cwd();
  const templatesDir = str('templates_dir');
  const publishAddress = str('publish_address') ?? '0.0.0.0';
  if (!net.isIP(publishAddress)) throw new Error('config: apps.publish_address must be an IP address');
  const defaultStorageId = str('default_storage_id');
  if (defaultStorageId && !poolIds.includes(defaultStorageId)) throw new Error(`config: apps.default_storage_id '${defaultStorageId}' is not a storage pool`);
  const composeBinary = str('compose_binary');
  return {
    dockerHost: str('docker_host'),
    composeBinary: composeBinary ? path.resolve(base, composeBinary) : undefined,
    templatesDir: templatesDir ? path.resolve(base, templatesDir) : undefined,
    publishAddress,
    defaultStorageId,
  };
}

export const appsDomain = defineDomain({
  name: 'apps',
  ops: opsOf('apps'),
  async open(deps) {
    const settings = parseSettings(deps.settings, deps.env, deps.config.pools.map((p) => p.id));
    const composeRoot = path.join(deps.config.dataDir, 'apps');
    fs.mkdirSync(composeRoot, { recursive: true, mode: 0o700 });
    const driver = new DockerDriver({ dockerHost: settings.dockerHost, composeBinary: settings.composeBinary, env: deps.env, configDir: path.join(composeRoot, '.docker') });
    const records = new AppRecords(deps.store);
    await records.load();
    const log = deps.log.child({ domain: 'apps' });
    const svc = new AppsService({
      driver,
      records,
      catalog: new TemplateCatalog(settings.templatesDir),
      pools: deps.config.pools,
      folders: () => deps.ports.get('folders'),
      tasks: deps.tasks,
      log,
      composeRoot,
      settings,
      pauseAt: deps.env.HOSTD_APPS_PAUSE_AT || undefined,
    });
    // Interrupted changes are settled as soon as the engine answers (now, or at the first call that finds it).
    void svc.ready().catch((err) => log.warn({ err: (err as Error).message }, 'apps: the Docker engine is not reachable yet'));
    // Apps installed before a rule that now refuses their compose file are named in the log (and in GET /apps).
    void svc.audit().catch((err) => log.warn({ err: (err as Error).message }, 'apps: could not check the stored compose files'));
    return {
      handlers: appsHandlers(svc),
      info: async () => ({ name: 'apps', built: true, runtimes: await driver.availability() }),
      close: async () => {},
      provides: { guests: { guests: () => svc.guests() } },
    };
  },
});
