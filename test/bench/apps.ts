/**
 * Apps on a private Docker engine (see test/helpers/apps-engine.ts):
 * - app_install_to_running_ms: POST /apps with custom content until it
 *   answers with the app running (hostd answers once `up -d` has started the
 *   containers), p50;
 * - app_restart_ms: POST /apps/{id}/actions restart, p50;
 * and the anchor, in the same run, alternating round by round: the compose
 * CLI itself, `up -d` and `restart` of the same compose content in a project
 * of its own. apps_overhead_ratio is the larger of the two hostd/compose
 * ratios (install, restart).
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { composeBinary, missingRuntime, stopEngines } from '../helpers/apps-engine.js';
import { APP_SCOPES, startLab } from '../helpers/apps-lab.js';
import { startDaemon } from '../helpers/daemon.js';
import { median, print } from './lib.js';

const exec = promisify(execFile);

export async function appsOverhead(): Promise<void> {
  const why = await missingRuntime();
  if (why) throw new Error(`cannot run: ${why}`);
  // The same compose CLI as hostd's, run directly for the comparison.
  const compose = await composeBinary();
  if (!compose) throw new Error('cannot run: compose v2 is not installed (run deploy/install-deps.sh)');
  const lab = await startLab();
  try {
    const d = await startDaemon({ configYaml: lab.configYaml, logToFile: true });
    const token = await d.token('bench', APP_SCOPES);
    const content = (port: number) => `services:
  web:
    image: ${lab.image}
    init: true
    command: ["httpd", "-f", "-p", "8080", "-h", "/www"]
    ports: ["127.0.0.1:${port}:8080"]
    volumes: ["./www:/www:ro"]
`;
    const direct = path.join(lab.dir, 'direct');
    fs.mkdirSync(path.join(direct, 'www'), { recursive: true });
    const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: direct, DOCKER_CONFIG: path.join(direct, '.docker'), DOCKER_HOST: lab.engine.host };
    const cli = (project: string, ...args: string[]) =>
      exec(compose, ['--ansi', 'never', '-p', project, '-f', path.join(direct, 'compose.yaml'), ...args], { env, cwd: direct, timeout: 120_000 });
    const time = async (fn: () => Promise<unknown>) => {
      const t = process.hrtime.bigint();
      await fn();
      return Number(process.hrtime.bigint() - t) / 1e6;
    };
    const rounds = Number(process.env.BENCH_APPS_ROUNDS ?? 7);
    const r = { hInstall: [] as number[], hRestart: [] as number[], cInstall: [] as number[], cRestart: [] as number[] };
    // One warm-up of each (first network, first container of the image).
    for (let i = -1; i < rounds; i++) {
      const port = 18500 + (i + 1) * 2;
      fs.writeFileSync(path.join(direct, 'compose.yaml'), content(port + 1));
      const cInstall = await time(() => cli(`direct${i + 1}`, 'up', '-d'));
      const cRestart = await time(() => cli(`direct${i + 1}`, 'restart'));
      await cli(`direct${i + 1}`, 'down', '--volumes');
      let state = '';
      const hInstall = await time(async () => {
        const res = await d.request('POST', '/api/v1/apps', { token, body: { template_id: 'custom', name: `bench${i + 1}`, compose_content: content(port) } });
        if (res.status !== 201) throw new Error(`install: ${res.status} ${res.text}`);
        state = res.body.app.state;
      });
      if (state !== 'running') throw new Error(`install answered state ${state}`);
      const hRestart = await time(async () => {
        const res = await d.request('POST', `/api/v1/apps/bench${i + 1}/actions`, { token, body: { action: 'restart' } });
        if (res.status !== 200 || res.body.app.state !== 'running') throw new Error(`restart: ${res.status} ${res.text}`);
      });
      const del = await d.request('DELETE', `/api/v1/apps/bench${i + 1}`, { token });
      if (del.status !== 200) throw new Error(`delete: ${del.status} ${del.text}`);
      if (i < 0) continue;
      r.hInstall.push(hInstall);
      r.hRestart.push(hRestart);
      r.cInstall.push(cInstall);
      r.cRestart.push(cRestart);
    }
    await d.stop();
    const hi = median(r.hInstall);
    const hr = median(r.hRestart);
    const ci = median(r.cInstall);
    const cr = median(r.cRestart);
    print('app_install_to_running_ms', hi, 1);
    print('app_restart_ms', hr, 1);
    print('compose_up_to_running_ms', ci, 1);
    print('compose_restart_ms', cr, 1);
    print('apps_install_overhead_ratio', hi / ci);
    print('apps_restart_overhead_ratio', hr / cr);
    print('apps_overhead_ratio', Math.max(hi / ci, hr / cr));
  } finally {
    await stopEngines();
  }
}
