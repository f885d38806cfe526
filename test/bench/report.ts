/**
 * `npm run bench -- --report DIR`: the run's figures as JSON and its plots as
 * SVG, drawn by vega-lite and vega in Node (no browser, no native build):
 *
 *   figures.json      every printed figure, by section, with the run's date and machine
 *   ratios.svg        each overhead ratio measured in this run against its target
 *   scale-*.svg       the curves of the scale section (cost against N, or against clients)
 *
 * A plot is written only when its section ran.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as vega from 'vega';
import * as vl from 'vega-lite';
import type { TopLevelSpec } from 'vega-lite';
import { figures } from './lib.js';

/** The ratios the issues set a target for (issue 26 and earlier), with the target. */
export const TARGETS: Record<string, number> = {
  api_overhead_ratio: 1.3,
  mcp_overhead_ratio: 1.5,
  forward_rps_ratio: 1.5,
  lxc_start_ratio: 1.2,
  activity_search_ratio: 3,
  activity_query_ratio: 3,
  warm_resume_overhead_ratio: 1.3,
};

async function svgOf(spec: TopLevelSpec): Promise<string> {
  const view = new vega.View(vega.parse(vl.compile(spec).spec), { renderer: 'none' });
  try {
    return await view.toSVG();
  } finally {
    view.finalize();
  }
}

/** Points `{series, x, y}` from figures named `<prefix><series>_<tag><x>`. */
function points(all: Record<string, number>, series: Record<string, string>, tag: 'n' | 'c'): Array<{ series: string; x: number; y: number }> {
  const out: Array<{ series: string; x: number; y: number }> = [];
  for (const [key, value] of Object.entries(all)) {
    for (const [name, label] of Object.entries(series)) {
      const m = new RegExp(`^${name}_${tag}(\\d+)$`).exec(key);
      if (m && Number.isFinite(value)) out.push({ series: label, x: Number(m[1]), y: value });
    }
  }
  return out;
}

function curve(title: string, xTitle: string, yTitle: string, values: Array<{ series: string; x: number; y: number }>, logX: boolean): TopLevelSpec {
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title,
    width: 420,
    height: 240,
    data: { values },
    mark: { type: 'line', point: true },
    encoding: {
      x: { field: 'x', type: 'quantitative', title: xTitle, scale: logX ? { type: 'log' } : {} },
      y: { field: 'y', type: 'quantitative', title: yTitle },
      color: { field: 'series', type: 'nominal', title: null },
    },
  };
}

/** The number of series in `pts` (a plot needs more points than series to draw a line). */
const latencyKinds = (pts: Array<{ series: string }>): number => new Set(pts.map((p) => p.series)).size;

/** Writes figures.json and the plots into `dir`; returns the names written. */
export async function writeReport(dir: string): Promise<string[]> {
  fs.mkdirSync(dir, { recursive: true });
  const written: string[] = [];
  const write = (name: string, text: string) => {
    fs.writeFileSync(path.join(dir, name), text);
    written.push(name);
  };
  write('figures.json', JSON.stringify({ date: new Date().toISOString(), cpus: os.cpus().length, node: process.version, figures }, null, 2) + '\n');

  const flat: Record<string, number> = Object.assign({}, ...Object.values(figures));
  const ratios = Object.entries(TARGETS)
    .filter(([k]) => flat[k] !== undefined)
    .map(([k, target]) => ({ figure: k, value: flat[k], target, min: flat[`${k}_min`] ?? flat[k], max: flat[`${k}_max`] ?? flat[k] }));
  if (ratios.length) {
    write(
      'ratios.svg',
      await svgOf({
        $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
        title: 'Overhead ratios (hostd / baseline, same run; median, min-max of runs) and their targets',
        width: 420,
        data: { values: ratios },
        layer: [
          {
            mark: 'bar',
            encoding: { y: { field: 'figure', type: 'nominal', title: null, sort: null }, x: { field: 'value', type: 'quantitative', title: 'ratio' } },
          },
          {
            mark: { type: 'rule', color: 'gray' },
            encoding: { y: { field: 'figure', type: 'nominal', sort: null }, x: { field: 'min', type: 'quantitative' }, x2: { field: 'max' } },
          },
          {
            mark: { type: 'tick', color: 'black', thickness: 2 },
            encoding: { y: { field: 'figure', type: 'nominal', sort: null }, x: { field: 'target', type: 'quantitative' } },
          },
        ],
      }),
    );
  }

  const scale = figures.scale ?? {};
  // Curves of other kinds: the scale section's, and the tombstones measured in the sandboxes section.
  const curves: Record<string, number> = { ...scale, ...(figures.sandboxes ?? {}) };
  const kinds = {
    folders: 'folders',
    lxc: 'LXC containers (running)',
    vms: 'VMs (stopped linked clones)',
    apps: 'apps (test engine)',
    sandbox_tombstones: 'sandbox tombstones',
  };
  const per = (what: string) => Object.fromEntries(Object.entries(kinds).map(([k, label]) => [`scale_${k}_${what}`, label]));
  const lists = points(curves, per('list_ms'), 'n');
  if (lists.length > latencyKinds(lists))
    write('scale-kinds-list.svg', await svgOf(curve('List latency (p50) with N of each kind', 'N (log)', 'ms', lists, true)));
  const gets = points(curves, per('get_ms'), 'n');
  if (gets.length > latencyKinds(gets))
    write('scale-kinds-get.svg', await svgOf(curve('Get latency (p50, one resource) with N of each kind', 'N (log)', 'ms', gets, true)));
  const rssKinds = points(curves, { ...per('rss_mb'), scale_rss_mb: 'folders' }, 'n');
  if (rssKinds.length > latencyKinds(rssKinds))
    write('scale-kinds-rss.svg', await svgOf(curve('Daemon memory with N of each kind', 'N (log)', 'MiB', rssKinds, true)));
  const kindClients = points(curves, { ...per('create_per_s'), scale_folders_create_per_s: 'folders' }, 'c');
  if (kindClients.length)
    write('scale-kinds-clients.svg', await svgOf(curve('Create throughput against clients in flight', 'clients', 'creates / s', kindClients, false)));
  const latency = points(scale, { scale_folders_list_ms: 'list folders', scale_folders_get_ms: 'get one folder' }, 'n');
  if (latency.length) write('scale-latency.svg', await svgOf(curve('Latency (p50) with N folders', 'N (log)', 'ms', latency, true)));
  const creates = points(scale, { scale_folders_create_per_s: 'folders, 4 clients' }, 'n');
  if (creates.length) write('scale-create-n.svg', await svgOf(curve('Create throughput while growing to N', 'N (log)', 'creates / s', creates, true)));
  const rss = points(scale, { scale_rss_mb: 'daemon RSS' }, 'n');
  if (rss.length) write('scale-rss.svg', await svgOf(curve('Daemon memory with N folders', 'N (log)', 'MiB', rss, true)));
  const clients = points(scale, { scale_folders_create_per_s: 'folders' }, 'c');
  if (clients.length) write('scale-clients.svg', await svgOf(curve('Create throughput against clients in flight', 'clients', 'creates / s', clients, false)));
  return written;
}
