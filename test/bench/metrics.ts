/**
 * What the metrics exposition costs, on a daemon running 50 LXC containers
 * (the busybox test image), each figure beside its baseline in the same run:
 *
 *   metrics_scrape_ms           p50 of sequential GET /api/v1/metrics by a token that sees every kind
 *                               (the runtime figures cached for 5 s, as a scraper polling every second sees them)
 *   metrics_scrape_uncached_ms  median of 5 scrapes each made once the cache has expired (every container's cgroup files read)
 *   metrics_health_ms           p50 of GET /api/v1/system/health, same daemon, same run
 *   api_overhead_while_scraped_ratio
 *                               api_overhead_ratio (a raw node:http server's rps over hostd's, GET /api/v1/folders)
 *                               while a scraper polls /api/v1/metrics every second, over the same figure without
 *                               it; one pair per round, median of 5 rounds (target at most 1.05)
 */
import { ALL_SCOPES } from '../../api/registry/index.js';
import { hostctl, startDaemon, tempDir } from '../helpers/daemon.js';
import { busyboxImage } from '../helpers/lxc-image.js';
import { killContainers, lxcMissing, removeCgroupGroup } from '../helpers/lxc-env.js';
import { latencies, load, median, pct, print, startRawServer } from './lib.js';

const CONTAINERS = Number(process.env.BENCH_METRICS_CONTAINERS ?? 50);

export async function metricsBench(): Promise<void> {
  const missing = lxcMissing();
  if (missing) {
    process.stdout.write(`# metrics skipped: ${missing}\n`);
    return;
  }
  const image = busyboxImage();
  const pool = tempDir('hostd-bench-metrics-pool-');
  const d = await startDaemon({ configYaml: `storage_pools:\n  - id: p1\n    path: ${pool}\nlxc:\n  stop_timeout_seconds: 10\n`, logToFile: true });
  let raw: ReturnType<typeof startRawServer> | null = null;
  try {
    const token = await d.token('bench-metrics', [...ALL_SCOPES]);
    const imp = await hostctl(d.dataDir, ['lxc', 'image', 'import', image.rootfs, '--id', 'bb']);
    if (imp.code !== 0) throw new Error(`image import failed: ${imp.stderr}`);
    const headers = { authorization: `Bearer ${token}` };
    const api = async (method: string, p: string, body?: unknown) => {
      const r = await d.request(method, `/api/v1${p}`, { token, body });
      if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${r.text}`);
      return r.body;
    };
    for (let i = 0; i < CONTAINERS; i++) {
      const id = (await api('POST', '/lxc', { name: `bench-${i}`, template: 'bb' })).container.lxcid;
      await api('POST', `/lxc/${id}/start`);
    }
    const get = (p: string) => async () => {
      const r = await fetch(`${d.url}/api/v1${p}`, { headers });
      const text = await r.text();
      if (r.status !== 200) throw new Error(`GET ${p}: ${r.status} ${text.slice(0, 200)}`);
      return text;
    };
    const scrape = get('/metrics');
    const first = await scrape();
    const series = first.split('\n').filter((l) => l.startsWith('hostd_lxc_cpu_seconds_total{')).length;
    if (series !== CONTAINERS) throw new Error(`the exposition has CPU seconds of ${series} containers, not ${CONTAINERS}`);

    const health = get('/system/health');
    for (let i = 0; i < 20; i++) await Promise.all([scrape(), health()]);
    const scrapeMs = pct(await latencies(100, scrape), 0.5);
    const healthMs = pct(await latencies(100, health), 0.5);
    const uncached: number[] = [];
    for (let i = 0; i < 5; i++) {
      // Past the 5 s cache: this scrape reads every container again.
      await new Promise((r) => setTimeout(r, 5_500));
      uncached.push((await latencies(1, scrape))[0]);
    }
    print('metrics_containers', CONTAINERS, 0);
    print('metrics_scrape_ms', scrapeMs);
    print('metrics_scrape_uncached_ms', median(uncached));
    print('metrics_health_ms', healthMs);
    print('metrics_scrape_over_health_ratio', scrapeMs / healthMs);

    for (const name of ['media', 'backups', 'projects']) await api('POST', '/folders', { storage_id: 'p1', name });
    const payload = await get('/folders')();
    raw = startRawServer(payload);
    const rawPort = await raw.port;
    const rawUrl = `http://127.0.0.1:${rawPort}/api/v1/folders`;
    const hostdUrl = `${d.url}/api/v1/folders`;
    await load(rawUrl, { headers, duration: 1 });
    await load(hostdUrl, { headers, duration: 1 });
    const overhead = async () => {
      const base = await load(rawUrl, { headers, duration: 3 });
      const h = await load(hostdUrl, { headers, duration: 3 });
      if (h.non2xx || h.errors) throw new Error(`hostd answered ${h.non2xx} non-2xx and ${h.errors} errors`);
      return base.rps / h.rps;
    };
    const without: number[] = [];
    const withScraper: number[] = [];
    const ratios: number[] = [];
    let scrapes = 0;
    for (let round = 0; round < 5; round++) {
      const quiet = await overhead();
      let failure: Error | null = null;
      const poll = setInterval(
        () =>
          void scrape().then(
            () => scrapes++,
            (err) => (failure = err),
          ),
        1_000,
      );
      let busy: number;
      try {
        busy = await overhead();
      } finally {
        clearInterval(poll);
      }
      if (failure) throw failure;
      without.push(quiet);
      withScraper.push(busy);
      ratios.push(busy / quiet);
    }
    print('api_overhead_ratio_unscraped', median(without));
    print('api_overhead_ratio_scraped', median(withScraper));
    print('metrics_scrapes_during_load', scrapes, 0);
    process.stdout.write(`# rounds (scraped over unscraped): ${ratios.map((r) => r.toFixed(3)).join(' ')}\n`);
    print('api_overhead_while_scraped_ratio', median(ratios));
  } finally {
    raw?.proc.kill('SIGTERM');
    killContainers(d.dataDir);
    await d.stop();
    removeCgroupGroup(d.dataDir);
  }
}
