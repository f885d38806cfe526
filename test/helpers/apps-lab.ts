/**
 * The setting of the apps runtime tests: a private engine with the test image,
 * two storage pools, a templates directory with test templates, and the
 * config that points hostd at all of it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { operationsOfDomain } from '../../api/registry/index.js';
import { Router } from '../../api/router.js';
import { resultProblem } from '../../api/validate.js';
import { importTestImage, startEngine, type TestEngine } from './apps-engine.js';
import { startDaemon, tempDir, type TestDaemon } from './daemon.js';

export interface AppsLab {
  engine: TestEngine;
  image: string;
  dir: string;
  pools: { p1: string; p2: string };
  templatesDir: string;
  configYaml: string;
}

// vm.read: GET /tasks/{id} needs it (the spec puts tasks under the VM scopes).
export const APP_SCOPES = ['apps.read', 'apps.manage', 'files.read', 'files.manage', 'vm.read'];

/** A web server on the test image: serves /www on port 8080 of the container. */
export function webTemplate(image: string): string {
  return `
name: Test web
description: busybox httpd serving a folder
ports:
  - name: WEB_PORT
    container_port: 8080
    default: 18080
    description: HTTP
data_folders:
  - id: site
    service: web
    container_path: /www
    read_only: true
    description: the files served
compose: |
  services:
    web:
      image: ${image}
      init: true
      command: ["httpd", "-f", "-p", "8080", "-h", "/www"]
      ports:
        - "\${HOSTD_PUBLISH_ADDRESS}:\${WEB_PORT}:8080"
`;
}

export async function startLab(): Promise<AppsLab> {
  const engine = await startEngine();
  const image = await importTestImage(engine);
  const dir = tempDir('hostd-apps-');
  const pools = { p1: path.join(dir, 'pool1'), p2: path.join(dir, 'pool2') };
  fs.mkdirSync(pools.p1);
  fs.mkdirSync(pools.p2);
  const templatesDir = path.join(dir, 'templates');
  fs.mkdirSync(templatesDir);
  fs.writeFileSync(path.join(templatesDir, 'test-web.yaml'), webTemplate(image));
  fs.writeFileSync(path.join(templatesDir, 'broken.yaml'), 'name: Broken\ncompose: |\n  services:\n    x:\n      image: a\n      privileged: true\n');
  const configYaml = [
    'storage_pools:',
    `  - {id: p1, path: ${pools.p1}}`,
    `  - {id: p2, path: ${pools.p2}}`,
    'apps:',
    `  docker_host: ${engine.host}`,
    `  templates_dir: ${templatesDir}`,
    '  publish_address: 127.0.0.1',
    '',
  ].join('\n');
  return { engine, image, dir, pools, templatesDir, configYaml };
}

export async function labDaemon(lab: AppsLab, opts: { dataDir?: string; env?: Record<string, string> } = {}): Promise<TestDaemon> {
  return startDaemon({ configYaml: lab.configYaml, dataDir: opts.dataDir, env: opts.env });
}

/** A small custom app: an HTTP server on the test image, published on a loopback port of the engine's namespace. */
export function webCompose(image: string, port: number, extra = ''): string {
  return `services:
  web:
    image: ${image}
    init: true
    command: ["httpd", "-f", "-p", "8080", "-h", "/www"]
    ports: ["127.0.0.1:${port}:8080"]
${extra}`;
}

/**
 * GET a URL from inside the engine's namespace (where published ports live).
 * A container that just started may not listen yet: a refused connection
 * (code 0) is tried again for up to 15 s before it is the answer.
 */
export async function fetchInNetns(engine: TestEngine, url: string): Promise<{ code: number; body: string }> {
  const end = Date.now() + 15_000;
  for (;;) {
    const r = await engine.inNetns(['curl', '-sS', '--max-time', '10', '-o', '-', '-w', '\n%{http_code}', url], 20_000);
    const i = r.stdout.lastIndexOf('\n');
    const got = { code: Number(r.stdout.slice(i + 1)) || 0, body: r.stdout.slice(0, i) };
    if (got.code !== 0 || Date.now() > end) return got;
    await new Promise((res) => setTimeout(res, 200));
  }
}

/** Waits for a task to end (bounded) and returns it. */
export async function waitTask(d: TestDaemon, token: string, taskId: string, ms = 60_000): Promise<any> {
  const end = Date.now() + ms;
  for (;;) {
    const r = await d.request('GET', `/api/v1/tasks/${taskId}`, { token });
    if (r.status !== 200) throw new Error(`task ${taskId}: ${r.status} ${r.text}`);
    if (r.body.task.state === 'succeeded' || r.body.task.state === 'failed') return r.body.task;
    if (Date.now() > end) throw new Error(`task ${taskId} did not end within ${ms} ms`);
    await new Promise((res) => setTimeout(res, 100));
  }
}

const appsRoutes = new Router(operationsOfDomain('apps'));

/**
 * Why a success answer of an apps operation does not fit the operation's
 * result schema, or undefined (it fits, is no success, or is no apps call).
 * The conformance walk runs without an engine, so the apps answers it sees
 * are 503s: the runtime suites check every answer they get with this.
 */
export function appsResultProblem(method: string, apiPath: string, r: { status: number; body: unknown }): string | undefined {
  const p = apiPath.split('?')[0];
  if (r.status < 200 || r.status > 299 || !/^\/apps(\/|$)/.test(p)) return undefined;
  const problem = resultProblem(appsRoutes.match(method, p).op, r.body);
  return problem && `${method} ${apiPath}: ${problem}`;
}
