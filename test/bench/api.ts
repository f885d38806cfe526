/**
 * api_overhead_ratio: GET /api/v1/folders on hostd against a raw node:http
 * server answering the same JSON, measured in the same run.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { startDaemon } from '../helpers/daemon.js';
import { load, print } from './lib.js';

export async function apiOverhead(): Promise<void> {
  const d = await startDaemon({ env: { HOSTD_LOG_LEVEL: 'info' }, logToFile: true });
  const token = await d.token('bench', ['files.read', 'files.manage']);
  for (const name of ['media', 'backups', 'projects']) {
    await d.request('POST', '/api/v1/folders', { token, body: { storage_id: 'default', name } });
  }
  const sample = await d.request('GET', '/api/v1/folders', { token });
  const payload = sample.text;
  const raw = spawn(process.execPath, [path.join(path.dirname(fileURLToPath(import.meta.url)), 'raw-server.js')], {
    env: { ...process.env, BENCH_PAYLOAD: payload },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const rawPort = await new Promise<number>((resolve) => {
    readline.createInterface({ input: raw.stdout! }).once('line', (l) => resolve(JSON.parse(l).port));
  });
  const rawUrl = `http://127.0.0.1:${rawPort}/api/v1/folders`;
  const headers = { authorization: `Bearer ${token}` };
  // Warm both up, then measure the baseline and hostd back to back.
  await load(rawUrl, { headers, duration: 1 });
  await load(d.url + '/api/v1/folders', { headers, duration: 1 });
  const base = await load(rawUrl, { headers });
  const hostd = await load(d.url + '/api/v1/folders', { headers });
  raw.kill('SIGTERM');
  await d.stop();
  if (hostd.non2xx || hostd.errors) throw new Error(`hostd answered ${hostd.non2xx} non-2xx and ${hostd.errors} errors`);
  print('raw_rps', base.rps, 0);
  print('raw_p50_ms', base.p50);
  print('raw_p99_ms', base.p99);
  print('hostd_rps', hostd.rps, 0);
  print('hostd_p50_ms', hostd.p50);
  print('hostd_p99_ms', hostd.p99);
  print('api_overhead_ratio', base.rps / hostd.rps);
}
