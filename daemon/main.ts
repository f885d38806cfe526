/**
 * hostd entry point: reads the configuration, starts the daemon, and stops it
 * cleanly on SIGINT/SIGTERM.
 */
import { loadConfig } from './config.js';
import { createLoggers } from './logger.js';
import { startDaemon } from './daemon.js';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (err) {
    process.stderr.write(`hostd: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const { log, requests } = createLoggers(config.logLevel);
  let daemon;
  try {
    daemon = await startDaemon(config, log, requests);
  } catch (err) {
    log.fatal({ err }, 'hostd failed to start');
    process.stderr.write(`hostd: ${(err as Error).message}\n`);
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

void main();
