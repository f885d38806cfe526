/**
 * `npm run bench -- --report DIR`: the run's figures as JSON and its plots as
 * SVG, drawn by vega-lite and vega in Node (no browser, no native build):
 *
 *   figures.json      every printed figure, by section, with the run's date and machine
 *   ratios.svg        each overhead ratio measured in this run against its target
 *   scale-*.svg       the curves of the scale section (cost against N, or against clients)
 *   scale-cluster.svg the cluster curve: forwarded latency, the proxy move's gap, members=all
 *                     delivery and member A's memory against the cluster's size
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

/** Points `{series, x, y}` from figures named `<prefix><series>_<tag><x>` (n: N, c: clients, m: members). */
function points(all: Record<string, number>, series: Record<string, string>, tag: 'n' | 'c' | 'm'): Array<{ series: string; x: number; y: number }> {
  const out: Array<{ series: string; x: number; y: number }> = [];
  for (const [key, value] of Object.entries(all)) {
    for (const [name, label] of Object.entries(series)) {
      const m = new RegExp(`^${name}_${tag}(\\d+)$`).exec(key);
      if (m && Number.isFinite(value)) out.push({ series: label, x: Number(m[1]), y: value });
    }
  }
  return out;
}

type Point = { series: string; x: number; y: number };

/** One line plot; `logX` a log scale (`2`: base 2, ticks at the points' x). */
function panel(title: string, xTitle: string, yTitle: string, values: Point[], logX: boolean | 2) {
  const x =
    logX === 2
      ? { scale: { type: 'log' as const, base: 2 }, axis: { values: [...new Set(values.map((v) => v.x))].sort((a, b) => a - b), format: 'd' } }
      : { scale: logX ? { type: 'log' as const } : {} };
  return {
    title,
    width: 420,
    height: 240,
    data: { values },
    mark: { type: 'line' as const, point: true },
    encoding: {
      x: { field: 'x', type: 'quantitative' as const, title: xTitle, ...x },
      y: { field: 'y', type: 'quantitative' as const, title: yTitle },
      color: { field: 'series', type: 'nominal' as const, title: null },
    },
  };
}

function curve(title: string, xTitle: string, yTitle: string, values: Point[], logX: boolean): TopLevelSpec {
  return { $schema: 'https://vega.github.io/schema/vega-lite/v6.json', ...panel(title, xTitle, yTitle, values, logX) };
}

/** The cluster curve: one panel per kind of figure that ran, against the cluster's size. */
function clusterPlot(scale: Record<string, number>): TopLevelSpec | undefined {
  const panels = [
    panel(
      'GET /folders from member A (p50 of each member, worst p99)',
      'members (log)',
      'ms',
      points(
        scale,
        {
          scale_cluster_direct_p50_ms: 'direct p50',
          scale_cluster_forward_p50_ms: 'forwarded p50 (median of members)',
          scale_cluster_forward_p99_ms: 'forwarded p99 (worst member)',
        },
        'm',
      ),
      2,
    ),
    panel(
      'Proxy move: gap the client sees (network namespaces)',
      'members (log)',
      'ms',
      points(scale, { scale_cluster_move_gap_ms: 'median of the moves', scale_cluster_move_gap_max_ms: 'longest move' }, 'm'),
      2,
    ),
    panel(
      'Event delivery p99 over the mutation p99',
      'members (log)',
      'ratio',
      points(
        scale,
        {
          scale_cluster_all_delivery_ratio: 'members=all on A, creates on the others',
          scale_cluster_all_delivery_ratio_baseline: "A's own stream, creates on A",
        },
        'm',
      ),
      2,
    ),
    panel("Member A's memory", 'members (log)', 'MiB', points(scale, { scale_cluster_rss_mb_a: 'RSS' }, 'm'), 2),
  ].filter((p) => p.data.values.length);
  if (!panels.length) return undefined;
  for (const p of panels) (p.encoding.color as Record<string, unknown>).legend = { orient: 'bottom', direction: 'vertical', labelLimit: 400 };
  return {
    $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
    title: 'Clusters of 2, 4 and 8 daemons',
    vconcat: panels,
    // Each panel names its own series.
    resolve: { scale: { color: 'independent' }, legend: { color: 'independent' } },
  } as TopLevelSpec;
}

/** The number of series in `pts` (a plot needs more points than series to draw a line). */
const latencyKinds = (pts: Point[]): number => new Set(pts.map((p) => p.series)).size;

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
  const cluster = clusterPlot(scale);
  if (cluster) write('scale-cluster.svg', await svgOf(cluster));
  return written;
}
