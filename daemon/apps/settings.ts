/**
 * The `apps:` section of the config file (all optional):
 *
 *   apps:
 *     docker_host: unix:///var/run/docker.sock   # else DOCKER_HOST, else the system socket
 *     compose_binary: /usr/local/lib/docker/cli-plugins/docker-compose
 *     templates_dir: /etc/hostd/app-templates    # relative to the config file
 *     publish_address: 0.0.0.0                   # where templates publish their ports
 *     default_storage_id: main                   # pool for apps installed without storage_id
 */
import net from 'node:net';
import path from 'node:path';

export interface AppsSettings {
  dockerHost?: string;
  composeBinary?: string;
  templatesDir?: string;
  /** Host address templates publish their ports on (HOSTD_PUBLISH_ADDRESS). */
  publishAddress: string;
  defaultStorageId?: string;
}

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
