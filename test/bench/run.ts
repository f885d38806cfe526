/**
 * `npm run bench`: every figure the issues ask for, each against a baseline
 * measured in this same run. Sections run one after another so they do not
 * compete for the two cores.
 */
import { apiOverhead } from './api.js';
import { mcpOverhead } from './mcp.js';
import { clusterForwarding } from './cluster.js';
import { locationListing } from './locations.js';
import { appsOverhead } from './apps.js';
import { proxyBench } from './proxy.js';
import { foldersFs } from './folders.js';
import { lxcBench } from './lxc.js';
import { activityQueries } from './activity.js';
import { vmsBench } from './vms.js';
import { sandboxesBench } from './sandboxes.js';
import { eventsBench } from './events.js';
import { metricsBench } from './metrics.js';
import { consoleBench } from './console.js';
import { stopAll } from '../helpers/daemon.js';

const sections: Array<[string, () => Promise<void>]> = [
  ['api', apiOverhead],
  ['mcp', mcpOverhead],
  ['cluster', clusterForwarding],
  ['locations', locationListing],
  ['apps', appsOverhead],
  ['proxy', proxyBench],
  ['folders', foldersFs],
  ['lxc', lxcBench],
  ['activity', activityQueries],
  ['vms', vmsBench],
  ['sandboxes', sandboxesBench],
  ['events', eventsBench],
  ['metrics', metricsBench],
  ['console', consoleBench],
];

async function main(): Promise<void> {
  const only = process.argv[2];
  let failed = false;
  for (const [name, fn] of sections) {
    if (only && only !== name) continue;
    process.stdout.write(`# ${name}\n`);
    try {
      await fn();
    } catch (err) {
      failed = true;
      process.stdout.write(`# ${name} failed: ${(err as Error).message}\n`);
    }
  }
  await stopAll();
  process.exit(failed ? 1 : 0);
}

void main();
