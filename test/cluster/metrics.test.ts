/**
 * A real Prometheus scrapes two paired members, each directly at its own
 * address with its own bearer token (as deploy/prometheus does), and
 * answers PromQL for a counter this test increased through the API; peer_id
 * gives the other member's exposition through the mesh.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { eventually, onFreePorts, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { API, raw } from '../helpers/conformance.js';
import { sample } from '../helpers/metrics.js';
import { requireRuntime } from '../helpers/runtime-gate.js';
import { pair } from './util.js';

describe('metrics: a real Prometheus scrapes two members', function () {
  this.timeout(240_000);
  let a: TestDaemon;
  let b: TestDaemon;
  let prom: ChildProcess | undefined;
  let promUrl = '';
  let token = '';
  let tokens: string[] = [];
  const dir = tempDir('hostd-prom-');

  before(async function () {
    await requireRuntime(this, 'metrics', async () => [
      fs.existsSync('/usr/bin/prometheus')
        ? { name: 'prometheus', version: null, available: true, reason: null }
        : { name: 'prometheus', version: null, available: false, reason: "install Debian's prometheus package (deploy/install-deps.sh)" },
    ]);
    [a, b] = [
      await startDaemon({ env: { HOSTD_NODE_NAME: 'm-a', HOSTD_CLUSTER_PROBE_MS: '500' } }),
      await startDaemon({ env: { HOSTD_NODE_NAME: 'm-b', HOSTD_CLUSTER_PROBE_MS: '500' } }),
    ];
    await pair([a, b]);
    // A token is its member's: each member gets its own, and Prometheus one job per member (as deploy/prometheus does).
    tokens = [await a.token('prometheus', ['system.read', 'files.read']), await b.token('prometheus', ['system.read', 'files.read'])];
    token = tokens[0];
    const hostPort = (d: TestDaemon) => new URL(d.url).host;
    const lines = ['global:', '  scrape_interval: 1s', 'scrape_configs:'];
    for (const [i, d] of [a, b].entries()) {
      fs.writeFileSync(path.join(dir, `token-${i}`), tokens[i], { mode: 0o600 });
      lines.push(
        `  - job_name: hostd-${i}`,
        '    metrics_path: /api/v1/metrics',
        '    authorization:',
        '      type: Bearer',
        `      credentials_file: ${path.join(dir, `token-${i}`)}`,
        '    static_configs:',
        `      - targets: ['${hostPort(d)}']`,
      );
    }
    fs.writeFileSync(path.join(dir, 'prometheus.yml'), lines.join('\n') + '\n');
    await onFreePorts(1, async ([port]) => {
      const p = spawn(
        'prometheus',
        [`--config.file=${path.join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${path.join(dir, 'tsdb')}`, `--web.listen-address=127.0.0.1:${port}`],
        { stdio: ['ignore', 'ignore', 'pipe'] },
      );
      let err = '';
      p.stderr!.on('data', (c) => (err = (err + c.toString()).slice(-4000)));
      const exited = new Promise<void>((r) => p.once('exit', () => r()));
      promUrl = `http://127.0.0.1:${port}`;
      try {
        await Promise.race([
          eventually(async () => (await fetch(`${promUrl}/-/ready`).catch(() => null))?.ok === true, 60_000, 'Prometheus ready'),
          exited.then(() => {
            throw new Error(`prometheus exited: ${err}`);
          }),
        ]);
      } catch (e) {
        p.kill('SIGKILL');
        throw e;
      }
      prom = p;
    });
  });

  after(async () => {
    if (prom && prom.exitCode === null) {
      const gone = new Promise((r) => prom!.once('exit', r));
      prom.kill('SIGTERM');
      await gone;
    }
    await Promise.all([a, b].map((d) => d?.stop()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  const query = async (q: string): Promise<Array<{ metric: Record<string, string>; value: [number, string] }>> => {
    const r = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(q)}`);
    const body = (await r.json()) as { status: string; data: { result: any[] } };
    expect(body.status).to.equal('success');
    return body.data.result;
  };

  it('scrapes both members with the token (up is 1 for each)', async () => {
    const up = await eventually(
      async () => {
        const r = await query('up{job=~"hostd-.*"}');
        return r.length === 2 && r.every((s) => s.value[1] === '1') ? r : undefined;
      },
      60_000,
      'both targets up',
    );
    expect(up.map((s) => s.metric.instance).sort()).to.deep.equal([new URL(a.url).host, new URL(b.url).host].sort());
  });

  it('answers PromQL for a counter the test increased through the API, on the member that served the calls', async () => {
    const q = `sum by (instance) (hostd_api_requests_total{operation="folders_list",status="200"})`;
    const before = Number((await query(q)).find((s) => s.metric.instance === new URL(b.url).host)?.value[1] ?? 0);
    for (let i = 0; i < 7; i++) expect((await raw(b.url, 'GET', `${API}/folders`, { token: tokens[1] })).status).to.equal(200);
    await eventually(
      async () => {
        const v = Number((await query(q)).find((s) => s.metric.instance === new URL(b.url).host)?.value[1] ?? 0);
        return v >= before + 7 ? v : undefined;
      },
      60_000,
      'Prometheus seeing the seven calls on the second member',
    );
    // The build's own series names each member.
    const info = await query('hostd_build_info');
    expect(info.map((s) => s.metric.node_name).sort()).to.deep.equal(['m-a', 'm-b']);
  });

  it("peer_id gives the other member's exposition through the mesh", async () => {
    const r = await raw(a.url, 'GET', `${API}/metrics?peer_id=${encodeURIComponent(b.nodeId)}`, { token });
    expect(r.status, r.text.slice(0, 200)).to.equal(200);
    expect(r.headers['content-type']).to.equal('text/plain; version=0.0.4; charset=utf-8');
    expect(sample(r.text, 'hostd_build_info', { node_name: 'm-b' })).to.equal(1);
    expect(sample(r.text, 'hostd_cluster_members', { state: 'reachable' })).to.equal(2);
    // The origin counted that call by the member it went to, and timed it.
    const own = (await raw(a.url, 'GET', `${API}/metrics`, { token })).text;
    expect(sample(own, 'hostd_forwarded_calls_total', { peer: b.nodeId, status: '200' })).to.be.at.least(1);
    expect(sample(own, 'hostd_forwarded_call_duration_seconds_count', { peer: b.nodeId })).to.be.at.least(1);
  });

  it("through the mesh, the other member shows per-resource families only as far as the caller's token reaches", async () => {
    const via = (tok: string) => raw(a.url, 'GET', `${API}/metrics?peer_id=${encodeURIComponent(b.nodeId)}`, { token: tok });
    const bare = await via(token);
    expect(bare.status).to.equal(200);
    expect(bare.text).to.not.match(/# TYPE hostd_(lxc|app|vm)_/);
    const reader = await a.token('prometheus-lxc', ['system.read', 'lxc.read']);
    const wide = await via(reader);
    expect(wide.status, wide.text.slice(0, 200)).to.equal(200);
    expect(sample(wide.text, 'hostd_build_info', { node_name: 'm-b' })).to.equal(1);
    expect(wide.text).to.include('# TYPE hostd_lxc_info gauge');
    expect(wide.text).to.not.match(/# TYPE hostd_(app|vm)_/);
  });
});
