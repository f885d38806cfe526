/**
 * The token-less listener (metrics.listen): off by default; when on, GET
 * /metrics answers the aggregates only (no per-resource series, whatever the
 * host runs), every other path 404, other methods 405; it stops with the
 * daemon; a listen value that is not an address stops the start naming it.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { eventually, startDaemon, tempDir, type TestDaemon } from '../../helpers/daemon.js';
import { sample } from '../../helpers/metrics.js';
import { MetricsService } from '../../../daemon/metrics/service.js';
import type { GuestInfo, LeaseView } from '../../../daemon/domain.js';
import { startListener } from '../../../daemon/metrics/listener.js';
import { parseMetricsSettings } from '../../../daemon/metrics/settings.js';
import pino from 'pino';

/** The address the daemon's log says the listener is bound to. */
async function listenerAddress(d: TestDaemon): Promise<string> {
  const line = await eventually(() => d.logs.find((l) => l.msg === 'metrics: token-less listener (aggregates only)'), 30_000, "the listener's log line");
  return line.address as string;
}

describe('metrics: the token-less listener', function () {
  this.timeout(120_000);

  it('is off by default: the daemon logs no listener and serves metrics only on the API, with a token', async () => {
    const d = await startDaemon();
    try {
      const token = await d.token('scraper', ['system.read']);
      expect((await d.request('GET', '/api/v1/metrics', { token })).status).to.equal(200);
      expect(d.logs.some((l) => /token-less listener/.test(String(l.msg)))).to.equal(false);
    } finally {
      await d.stop();
    }
  });

  it('when on, serves the aggregates without a token, 404 for other paths, 405 for other methods, and stops with the daemon', async () => {
    const d = await startDaemon({ configYaml: 'metrics:\n  listen: 127.0.0.1:0\n' });
    let addr = '';
    try {
      addr = await listenerAddress(d);
      expect(addr).to.match(/^127\.0\.0\.1:\d+$/);
      const r = await fetch(`http://${addr}/metrics`);
      expect(r.status).to.equal(200);
      expect(r.headers.get('content-type')).to.equal('text/plain; version=0.0.4; charset=utf-8');
      const text = await r.text();
      expect(sample(text, 'hostd_cluster_members', { state: 'reachable' })).to.equal(1);
      expect(text).to.include('# TYPE hostd_runtime_available gauge');
      expect(text).to.include('# TYPE hostd_process_resident_memory_bytes gauge');
      // Sandbox start times are aggregates (a method, never an id): there, both methods from the start.
      expect(sample(text, 'hostd_sandbox_start_seconds_count', { method: 'warm' })).to.equal(0);
      expect(sample(text, 'hostd_sandbox_start_seconds_count', { method: 'cold' })).to.equal(0);
      expect(text).to.not.match(/^hostd_(vm|lxc|app)_/m);
      expect(text).to.not.match(/# TYPE hostd_(vm|lxc|app)_/);
      const om = await fetch(`http://${addr}/metrics`, { headers: { accept: 'application/openmetrics-text;version=1.0.0' } });
      expect(om.headers.get('content-type')).to.match(/^application\/openmetrics-text/);
      expect((await om.text()).trimEnd().endsWith('# EOF')).to.equal(true);
      for (const p of ['/', '/api/v1/metrics', '/api/v1/system/health', '/metrics/../api/v1/folders', '/metricsx']) {
        const o = await fetch(`http://${addr}${p}`);
        expect(o.status, p).to.equal(404);
        expect(await o.text(), p).to.not.include('hostd_');
      }
      expect((await fetch(`http://${addr}/metrics`, { method: 'POST', body: '{}' })).status).to.equal(405);
    } finally {
      await d.stop();
    }
    const after = await fetch(`http://${addr}/metrics`).then(
      () => 'answered',
      (err) => String(err.cause?.code ?? err),
    );
    expect(after).to.equal('ECONNREFUSED');
  });

  it('never serves per-resource series, even when the host has resources the API would show', async () => {
    const lease = {
      state: (): LeaseView => ({ holder: null, epoch: 0, holding: false }),
      onChange: () => () => {},
      move: async () => lease.state(),
      takeover: async () => lease.state(),
    };
    const ct: GuestInfo = { kind: 'lxc', id: '7', name: 'web', state: 'running', running: true, cpu_cores: 1, memory_mb: 64, addresses: [] };
    const m = new MetricsService();
    m.attach({
      nodeId: 'n',
      nodeName: 'a',
      version: '0',
      lease,
      peers: async () => [],
      domainInfo: async () => [],
      guests: () => [{ guests: async () => [ct] }],
      usage: () => [
        {
          kind: 'lxc',
          usage: async () => [
            { id: '7', cpu_seconds: 1, memory_bytes: 1, disk_read_bytes: 1, disk_written_bytes: 1, network_received_bytes: 1, network_transmitted_bytes: 1 },
          ],
        },
      ],
      mountStates: () => [],
      proxyFigures: () => [
        {
          config: () => ({ version: 1, applied_version: 1, apply_failed: false }),
          certificates: () => [{ domain: 'example.test', not_after: '2030-01-01T00:00:00Z' }],
          onApply: () => {},
        },
      ],
    });
    // The same service shows the container to a token holding lxc.read: the listener's answer lacks it by rule, not for want of data.
    expect(sample((await m.expose('prometheus', { scopes: ['lxc.read'] })).text, 'hostd_lxc_cpu_seconds_total', { id: '7' })).to.equal(1);
    const l = await startListener(m, { host: '127.0.0.1', port: 0 }, pino({ level: 'silent' }));
    try {
      const text = await (await fetch(`http://${l.address}/metrics`)).text();
      expect(text).to.include('# TYPE hostd_build_info gauge');
      expect(text).to.not.match(/hostd_lxc_/);
      expect(text).to.not.include('example.test');
    } finally {
      await l.close();
      m.close();
    }
  });

  it('reads its address from metrics.listen: a bare port is loopback; a name, a bad port or an unknown key stops the start', async () => {
    expect(parseMetricsSettings(undefined)).to.deep.equal({ listen: null });
    expect(parseMetricsSettings({ listen: 9464 })).to.deep.equal({ listen: { host: '127.0.0.1', port: 9464 } });
    expect(parseMetricsSettings({ listen: '9464' })).to.deep.equal({ listen: { host: '127.0.0.1', port: 9464 } });
    expect(parseMetricsSettings({ listen: '0.0.0.0:9464' })).to.deep.equal({ listen: { host: '0.0.0.0', port: 9464 } });
    expect(parseMetricsSettings({ listen: '[::1]:9464' })).to.deep.equal({ listen: { host: '::1', port: 9464 } });
    for (const bad of ['localhost:9464', '127.0.0.1:70000', '127.0.0.1', ':9464', true]) {
      expect(() => parseMetricsSettings({ listen: bad }), String(bad)).to.throw(/metrics\.listen must be/);
    }
    expect(() => parseMetricsSettings({ port: 1 })).to.throw('config: metrics.port is not a known setting (known: listen)');
    const dir = tempDir('hostd-metrics-cfg-');
    const d = await startDaemon({ dataDir: dir, configYaml: 'metrics:\n  listen: localhost:9464\n' }).then(
      (x) => x,
      (err: Error) => err,
    );
    if (!(d instanceof Error)) {
      await d.stop();
      expect.fail('the daemon started with metrics.listen: localhost:9464');
    }
    const log = fs.existsSync(path.join(dir, 'hostd.log')) ? fs.readFileSync(path.join(dir, 'hostd.log'), 'utf8') : '';
    expect(`${d.message}${log}`).to.include('metrics.listen must be');
  });
});
