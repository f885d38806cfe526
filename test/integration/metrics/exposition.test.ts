/**
 * GET /api/v1/metrics: the Prometheus exposition of a member, as promtool
 * reads it; OpenMetrics when Accept asks for it; system.read needed (401,
 * 403 as everywhere); counters that move with the calls the test makes;
 * not an MCP tool; text/plain in OpenAPI (tasks: test/unit/metrics).
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startDaemon, tempDir, type TestDaemon } from '../../helpers/daemon.js';
import { API, raw } from '../../helpers/conformance.js';
import { fileURLToPath } from 'node:url';
import { sample } from '../../helpers/metrics.js';
import { promtool } from './promtool.js';

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

describe('metrics: GET /api/v1/metrics', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let reader: string;

  before(async () => {
    d = await startDaemon({ env: { HOSTD_NODE_NAME: 'metrics-a' } });
    reader = await d.token('scraper', ['system.read']);
  });
  after(async () => {
    await d?.stop();
  });

  const scrape = async (token = reader, headers: Record<string, string> = {}) => raw(d.url, 'GET', `${API}/metrics`, { token, headers });

  it('answers Prometheus text that promtool accepts, with the build, requests, tasks and process families', async () => {
    const r = await scrape();
    expect(r.status).to.equal(200);
    expect(r.headers['content-type']).to.equal('text/plain; version=0.0.4; charset=utf-8');
    const text = r.text;
    const check = await promtool(text);
    expect(check.code, check.out).to.equal(0);
    expect(sample(text, 'hostd_build_info', { node_name: 'metrics-a', version: '0.1.0' })).to.equal(1);
    for (const family of [
      'hostd_api_requests_total',
      'hostd_api_request_duration_seconds',
      'hostd_tasks_started_total',
      'hostd_task_duration_seconds',
      'hostd_cluster_members',
      'hostd_proxy_holder',
      'hostd_proxy_lease_epoch',
      'hostd_runtime_available',
      'hostd_process_cpu_seconds_total',
      'hostd_process_resident_memory_bytes',
    ]) {
      expect(text, family).to.include(`# TYPE ${family} `);
    }
    expect(sample(text, 'hostd_cluster_members', { state: 'reachable' })).to.equal(1);
    // The locations and proxy domains' ports are wired: their aggregates are there on a fresh member.
    expect(sample(text, 'hostd_locations', { status: 'mounted' })).to.equal(0);
    expect(sample(text, 'hostd_proxy_config_apply_failed')).to.be.oneOf([0, 1]);
    expect(text).to.include('# TYPE hostd_proxy_config_version gauge');
    // Every runtime a domain drives is a series, available or not.
    expect(sample(text, 'hostd_runtime_available', { domain: 'vms', runtime: 'qemu-system-x86_64' })).to.be.oneOf([0, 1]);
  });

  it('counts each call by operation, transport and status, as it happens', async () => {
    const before = sample((await scrape()).text, 'hostd_api_requests_total', { operation: 'system_health', transport: 'api', status: '200' }) ?? 0;
    for (let i = 0; i < 3; i++) expect((await raw(d.url, 'GET', `${API}/system/health`, { token: reader })).status).to.equal(200);
    expect((await raw(d.url, 'GET', `${API}/folders`, { token: reader })).status).to.equal(403);
    const text = (await scrape()).text;
    expect(sample(text, 'hostd_api_requests_total', { operation: 'system_health', transport: 'api', status: '200' })).to.equal(before + 3);
    expect(sample(text, 'hostd_api_requests_total', { operation: 'folders_list', transport: 'api', status: '403' })).to.be.at.least(1);
    expect(sample(text, 'hostd_api_request_duration_seconds_count', { operation: 'system_health' })).to.be.at.least(before + 3);
    // Nothing of the caller in a label: no token name, no request id.
    expect(text).to.not.include('scraper');
  });

  it('counts the activity rows written, by severity', async () => {
    const writer = await d.token('metrics-writer', ['files.manage']);
    const rows = async () => {
      const text = (await scrape()).text;
      return {
        info: sample(text, 'hostd_activity_rows_total', { severity: 'info' }) ?? 0,
        warning: sample(text, 'hostd_activity_rows_total', { severity: 'warning' }) ?? 0,
      };
    };
    const before = await rows();
    expect(
      (
        await raw(d.url, 'POST', `${API}/folders`, {
          token: writer,
          body: JSON.stringify({ storage_id: 'default', name: 'metrics-rows' }),
          headers: { 'content-type': 'application/json' },
        })
      ).status,
    ).to.equal(201);
    // A refused change is a warning row (docs/api-decisions.md).
    expect(
      (
        await raw(d.url, 'POST', `${API}/folders`, {
          token: writer,
          body: JSON.stringify({ storage_id: 'default', name: 'metrics-rows' }),
          headers: { 'content-type': 'application/json' },
        })
      ).status,
    ).to.equal(409);
    const after = await rows();
    expect(after.info - before.info, 'info rows').to.equal(1);
    expect(after.warning - before.warning, 'warning rows').to.equal(1);
  });

  it('answers OpenMetrics when Accept asks for it, and when format=openmetrics', async () => {
    const r = await scrape(reader, { accept: 'application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5' });
    expect(r.status).to.equal(200);
    expect(r.headers['content-type']).to.equal('application/openmetrics-text; version=1.0.0; charset=utf-8');
    expect(r.text.trimEnd().endsWith('# EOF')).to.equal(true);
    const q = await raw(d.url, 'GET', `${API}/metrics?format=openmetrics`, { token: reader });
    expect(q.headers['content-type']).to.match(/^application\/openmetrics-text/);
    expect((await raw(d.url, 'GET', `${API}/metrics?format=xml`, { token: reader })).status).to.equal(400);
    // Counters are named as each format wants, whichever was asked for first, also when both are asked at once.
    const [open, text] = await Promise.all([scrape(reader, { accept: 'application/openmetrics-text;version=1.0.0' }), scrape()]);
    expect(open.text).to.match(/^# TYPE hostd_api_requests counter$/m);
    expect(open.text).to.match(/^hostd_api_requests_total\{/m);
    for (const t of [text.text, (await scrape()).text]) {
      expect(t).to.match(/^# TYPE hostd_api_requests_total counter$/m);
      expect(t).to.match(/^hostd_api_requests_total\{/m);
      const check = await promtool(t);
      expect(check.code, check.out).to.equal(0);
    }
  });

  it('needs a token with system.read: 401 without one, 403 with another scope', async () => {
    const none = await raw(d.url, 'GET', `${API}/metrics`);
    expect(none.status).to.equal(401);
    expect(none.headers['www-authenticate']).to.equal('Bearer realm="hostd"');
    const other = await d.token('files-only', ['files.read']);
    expect((await scrape(other)).status).to.equal(403);
  });

  it('is in OpenAPI as text, and is not an MCP tool', async () => {
    const doc = (await d.request('GET', `${API}/openapi.json`)).body;
    const ok = doc.paths[`${API}/metrics`].get.responses['200'].content;
    expect(Object.keys(ok).sort()).to.deep.equal(['application/openmetrics-text', 'text/plain']);
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${reader}` };
    const list = await d.request('POST', '/mcp', { headers, body: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} } });
    const names = (list.body?.result?.tools ?? []).map((t: { name: string }) => t.name);
    expect(names).to.include('system_health');
    expect(names).to.not.include('metrics_get');
    const call = await d.request('POST', '/mcp', {
      headers,
      body: { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'metrics_get', arguments: {} } },
    });
    expect(call.body?.error?.message).to.include('metrics_get not found');
  });

  it('deploy/: every query of the Grafana dashboard names families this member serves; promtool accepts the scrape config', async () => {
    // The dashboard's scraper holds every read scope: it sees each kind's per-resource families.
    const text = (await scrape(await d.token('dashboard', ['system.read', 'vm.read', 'lxc.read', 'apps.read']))).text;
    for (const family of ['hostd_lxc_info', 'hostd_vm_state', 'hostd_app_cpu_seconds_total', 'hostd_sandboxes'])
      expect(text, family).to.include(`# TYPE ${family} `);
    const served = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]));
    const dash = JSON.parse(fs.readFileSync(path.join(REPO, 'deploy/prometheus/grafana-dashboard.json'), 'utf8'));
    const exprs: string[] = dash.panels.flatMap((p: { targets: Array<{ expr: string }> }) => p.targets.map((t) => t.expr));
    expect(exprs.length).to.be.greaterThan(5);
    for (const expr of exprs) {
      const names = [...expr.matchAll(/\bhostd_[a-z0-9_]+/g)].map((m) => m[0].replace(/_(bucket|count|sum)$/, ''));
      expect(names, expr).to.not.deep.equal([]);
      for (const n of names) expect(served.has(n) || served.has(n.replace(/_total$/, '')), `${n} in ${expr}`).to.equal(true);
    }
    // The scrape config names token files that exist on a real Prometheus host only: check a copy pointing at one here.
    const dir = tempDir('hostd-promcfg-');
    fs.writeFileSync(path.join(dir, 't'), 'x');
    const cfg = fs.readFileSync(path.join(REPO, 'deploy/prometheus/prometheus.yml'), 'utf8').replace(/\/etc\/prometheus\/[a-z-]+\.token/g, path.join(dir, 't'));
    fs.writeFileSync(path.join(dir, 'prometheus.yml'), cfg);
    const check = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile('promtool', ['check', 'config', path.join(dir, 'prometheus.yml')], { timeout: 60_000 }, (err, stdout, stderr) =>
        resolve({ code: err ? 1 : 0, out: `${stdout}${stderr}` }),
      );
    });
    expect(check.code, check.out).to.equal(0);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});
