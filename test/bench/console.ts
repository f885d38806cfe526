/**
 * The console's figures:
 *
 * - console_bundle_gzip_bytes: the shipped files (index.html, app.js,
 *   app.css) gzip-compressed, as the build made them.
 * - console_signin_to_overview_ms: p50 from opening a fresh one-time
 *   sign-in URL in Chromium (loopback only) to the overview rendered
 *   (members and health shown), over 5 rounds.
 * - console_overview_api_ms: p50 of the overview's own API calls made
 *   directly in the same run (whoami, then the member list for the picker,
 *   then peers, health and proxy host status at once, as the page makes
 *   them), over 20 rounds: the baseline.
 */
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { ROOT, hostctl, startDaemon } from '../helpers/daemon.js';
import { browserMissing, launchBrowser } from '../helpers/browser.js';
import { latencies, median, print } from './lib.js';

export async function consoleBench(): Promise<void> {
  const dir = path.join(ROOT, 'dist/console');
  const gz = ['index.html', 'app.js', 'app.css'].reduce((n, f) => n + zlib.gzipSync(fs.readFileSync(path.join(dir, f)), { level: 9 }).length, 0);
  print('console_bundle_gzip_bytes', gz, 0);

  const missing = browserMissing();
  if (missing) {
    process.stdout.write(`# console: browser figures skipped: ${missing}\n`);
    return;
  }
  const d = await startDaemon({ logToFile: true });
  const browser = await launchBrowser();
  try {
    const rounds: number[] = [];
    for (let i = 0; i < 5; i++) {
      const url = (await hostctl(d.dataDir, ['console'])).stdout.trim();
      const ctx = await browser.newContext();
      const page = await ctx.newPage();
      const t0 = performance.now();
      await page.goto(url);
      await page.getByRole('heading', { name: 'Members' }).waitFor();
      await page.getByTestId('health-status').waitFor();
      rounds.push(performance.now() - t0);
      await ctx.close();
    }
    print('console_signin_to_overview_ms', median(rounds), 1);

    const token = await d.token('bench-console', ['system.read', 'proxy.read']);
    const get = (p: string) => fetch(`${d.url}/api/v1${p}`, { headers: { authorization: `Bearer ${token}` } }).then((r) => r.text());
    const direct = await latencies(20, async () => {
      await get('/whoami');
      await get('/peers');
      await Promise.all([get('/peers'), get('/system/health'), get('/proxy/host-status')]);
    });
    print('console_overview_api_ms', median(direct), 1);
  } finally {
    await browser.close();
    await d.stop();
  }
}
