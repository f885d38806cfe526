/**
 * `npm run bench`: every figure the issues ask for, each against a baseline
 * measured in this same run. Sections run one after another so they do not
 * compete for the two cores.
 *
 *   npm run bench [-- <section>] [-- --report DIR]
 *
 * `--report DIR` also writes the figures (figures.json) and their plots (SVG)
 * into DIR (test/bench/report.ts), after each section and at the end.
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
import { scaleBench } from './scale.js';
import { idleBench } from './idle.js';
import { stopAll } from '../helpers/daemon.js';
import { inSection } from './lib.js';
import { writeReport } from './report.js';

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
  ['idle', idleBench],
  ['scale', scaleBench],
];

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const r = args.indexOf('--report');
  const reportDir = r === -1 ? undefined : args[r + 1];
  if (r !== -1 && !reportDir) throw new Error('--report needs a directory');
  const only = args.filter((_, i) => r === -1 || (i !== r && i !== r + 1))[0];
  if (only && !sections.some(([name]) => name === only)) throw new Error(`no bench section '${only}' (${sections.map(([n]) => n).join(', ')})`);
  let failed = false;
  for (const [name, fn] of sections) {
    if (only && only !== name) continue;
    inSection(name);
    process.stdout.write(`# ${name}\n`);
    try {
      await fn();
    } catch (err) {
      failed = true;
      process.stdout.write(`# ${name} failed: ${(err as Error).message}\n`);
    }
    // After each section too: a run stopped part-way (a full run takes long on a loaded machine) leaves the report of what ran.
    if (reportDir) await writeReport(reportDir).catch((err) => process.stdout.write(`# report after ${name} failed: ${(err as Error).message}\n`));
  }
  await stopAll();
  if (reportDir) {
    try {
      process.stdout.write(`# report: ${(await writeReport(reportDir)).join(', ')}\n`);
    } catch (err) {
      failed = true;
      process.stdout.write(`# report failed: ${(err as Error).message}\n`);
    }
  }
  process.exit(failed ? 1 : 0);
}

void main();
