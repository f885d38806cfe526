/**
 * hostd entry point: reads the configuration, starts the daemon, and stops it
 * cleanly on SIGINT/SIGTERM.
 */
import { SYSTEM_CONFIG, loadConfig, type Config } from './config.js';
import { createLoggers } from './logger.js';
import { startDaemon, VERSION } from './daemon.js';
import { parseArgs } from 'node:util';

const USAGE = `usage: hostd [--config FILE]

Runs the hostd daemon in the foreground. Its configuration is one YAML file:
FILE, else the file HOSTD_CONFIG names, else ${SYSTEM_CONFIG} when it exists,
else none (the API on 127.0.0.1:8787, data in ./data). See
deploy/config.example.yaml; hostctl finds the daemon through the same file.
`;

/** The environment with the command line applied, or an exit status after printing usage or an error. */
function commandLine(argv: string[], env: NodeJS.ProcessEnv): NodeJS.ProcessEnv | number {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      options: { config: { type: 'string' }, help: { type: 'boolean', short: 'h' }, version: { type: 'boolean' } },
      strict: true,
    });
  } catch (err) {
    process.stderr.write(`hostd: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (parsed.values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  if (parsed.values.version) {
    process.stdout.write(`hostd ${VERSION}\n`);
    return 0;
  }
  return parsed.values.config ? { ...env, HOSTD_CONFIG: parsed.values.config } : env;
}

async function main(): Promise<void> {
  const env = commandLine(process.argv.slice(2), process.env);
  if (typeof env === 'number') process.exit(env);
  let config;
  try {
    config = loadConfig(env);
  } catch (err) {
    process.stderr.write(`hostd: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const { log, requests } = createLoggers(config.logLevel);
  let daemon;
  try {
    daemon = await startDaemon(config, log, requests);
  } catch (err) {
    const msg = startupMessage(err, config);
    log.fatal({ err }, 'hostd failed to start');
    process.stderr.write(`hostd: ${msg}\n`);
    log.flush(() => process.exit(1));
    return;
  }
  const stop = async (signal: string) => {
    log.info({ signal }, 'hostd stopping');
    await daemon.close();
    log.flush(() => process.exit(0));
  };
  process.once('SIGINT', () => void stop('SIGINT'));
  process.once('SIGTERM', () => void stop('SIGTERM'));
}

/**
 * The message for a failed start. A listen error on the API address says
 * which setting to change and where it came from (the config file's key, an
 * environment variable, or the default), as the cluster listener's does.
 */
export function startupMessage(err: unknown, config: Config): string {
  const e = err as NodeJS.ErrnoException & { port?: number; address?: string };
  const listenCodes = ['EADDRINUSE', 'EACCES', 'EADDRNOTAVAIL'];
  if (e && listenCodes.includes(e.code ?? '') && e.port === config.http.port && typeof e.syscall === 'string' && e.syscall === 'listen') {
    const addr = `${config.http.host.includes(':') ? `[${config.http.host}]` : config.http.host}:${config.http.port}`;
    const what = e.code === 'EADDRINUSE' ? 'is in use' : e.code === 'EACCES' ? 'is not allowed' : 'is not an address of this host';
    const source = config.sources?.http ?? 'the default';
    // Name the one setting that decided the address; for the default, where to set one.
    const where = source === 'the default' ? `set http_addr in ${config.configFile ?? SYSTEM_CONFIG} or HOSTD_HTTP_ADDR` : `change ${source}`;
    return `cannot listen for the API on ${addr}: the address ${what} (${where})`;
  }
  return (err as Error)?.message ?? String(err);
}

void main();
