/**
 * Where the Docker engine is, found the way the docker CLI finds it: the
 * `apps.docker_host` config key, else `DOCKER_HOST`, else the system socket
 * `unix:///var/run/docker.sock`. `tcp://` uses TLS when `DOCKER_TLS_VERIFY`
 * is set (certificates from `DOCKER_CERT_PATH`, default `~/.docker`), like the
 * CLI. Docker contexts are not read.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const DEFAULT_DOCKER_HOST = 'unix:///var/run/docker.sock';

export interface EngineAddress {
  /** As given, e.g. `unix:///var/run/docker.sock`, `tcp://10.0.0.2:2376`. */
  url: string;
  socketPath?: string;
  host?: string;
  port?: number;
  protocol?: 'http' | 'https' | 'ssh';
  username?: string;
  /** Environment for compose so that it talks to the same engine. */
  composeEnv: Record<string, string>;
}

/** Where the address came from, for messages. */
export type AddressSource = 'config' | 'DOCKER_HOST' | 'default';

export function engineAddress(
  configured: string | undefined,
  env: NodeJS.ProcessEnv,
): { address: EngineAddress; source: AddressSource; certs?: { ca: Buffer; cert: Buffer; key: Buffer } } {
  const source: AddressSource = configured ? 'config' : env.DOCKER_HOST ? 'DOCKER_HOST' : 'default';
  const url = (configured || env.DOCKER_HOST || DEFAULT_DOCKER_HOST).trim();
  const composeEnv: Record<string, string> = { DOCKER_HOST: url };
  if (url.startsWith('unix://')) {
    const socketPath = url.slice('unix://'.length) || '/var/run/docker.sock';
    return { address: { url, socketPath, composeEnv }, source };
  }
  if (url.startsWith('/')) {
    return { address: { url: `unix://${url}`, socketPath: url, composeEnv: { DOCKER_HOST: `unix://${url}` } }, source };
  }
  let u: URL;
  try {
    u = new URL(url.includes('://') ? url : `tcp://${url}`);
  } catch {
    throw new Error(`docker host '${url}' is not unix:///path, tcp://host:port or ssh://user@host`);
  }
  if (u.protocol === 'ssh:') {
    return {
      address: { url, host: u.hostname, port: Number(u.port || 22), protocol: 'ssh', username: decodeURIComponent(u.username) || undefined, composeEnv },
      source,
    };
  }
  if (u.protocol !== 'tcp:' && u.protocol !== 'http:' && u.protocol !== 'https:') {
    throw new Error(`docker host '${url}' has an unsupported scheme '${u.protocol}'`);
  }
  const tls = Boolean(env.DOCKER_TLS_VERIFY) || u.protocol === 'https:';
  const port = Number(u.port || (tls ? 2376 : 2375));
  if (!tls) return { address: { url, host: u.hostname, port, protocol: 'http', composeEnv }, source };
  const dir = env.DOCKER_CERT_PATH || path.join(os.homedir(), '.docker');
  composeEnv.DOCKER_TLS_VERIFY = '1';
  composeEnv.DOCKER_CERT_PATH = dir;
  const read = (f: string) => fs.readFileSync(path.join(dir, f));
  return {
    address: { url, host: u.hostname, port, protocol: 'https', composeEnv },
    source,
    certs: { ca: read('ca.pem'), cert: read('cert.pem'), key: read('key.pem') },
  };
}
