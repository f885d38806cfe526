/**
 * Per-resource series of a real app (a private Docker engine, through the
 * apps domain's usage port): the engine's figures summed over the app's
 * containers, under the app's id, only for a token holding apps.read.
 */
import { expect } from 'chai';
import { appsRuntime, missingRuntime, stopEngines } from '../../helpers/apps-engine.js';
import { APP_SCOPES, labDaemon, startLab, type AppsLab } from '../../helpers/apps-lab.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { COMPOSE } from '../../../daemon/apps/driver.js';
import { eventually, type TestDaemon } from '../../helpers/daemon.js';
import { sample } from '../../helpers/metrics.js';
import { promtool } from './promtool.js';

describe('metrics: per-resource series of a real app', function () {
  this.timeout(180_000);
  let lab: AppsLab | undefined;
  let d: TestDaemon | undefined;
  let tok: string;
  let appId: string | null = null;

  before(async function () {
    await requireRuntime(this, 'apps', appsRuntime(), { need: [COMPOSE], also: missingRuntime });
    lab = await startLab();
    d = await labDaemon(lab);
    tok = await d.token('apps-metrics', APP_SCOPES);
    const compose = `services:\n  idle:\n    image: ${lab.image}\n    init: true\n    command: ["sleep", "3600"]\n`;
    const r = await d.request('POST', '/api/v1/apps', { token: tok, body: { template_id: 'custom', name: 'metered', compose_content: compose } });
    expect(r.status, r.text).to.equal(201);
    appId = r.body.app.app_id;
  });

  after(async () => {
    if (d && appId) await d.request('DELETE', `/api/v1/apps/${appId}`, { token: tok }).catch(() => undefined);
    await d?.stop();
    if (lab) await stopEngines();
  });

  it("serves the app's state, name, CPU seconds, memory, disk and network figures under its id, to apps.read only", async () => {
    const withApps = await d!.token('scraper-apps', ['system.read', 'apps.read']);
    const systemOnly = await d!.token('scraper-system', ['system.read']);
    const labels = { id: appId! };
    const text = await eventually(
      async () => {
        const t = (await d!.request('GET', '/api/v1/metrics', { token: withApps })).text;
        return sample(t, 'hostd_app_memory_bytes', labels) !== undefined ? t : undefined;
      },
      60_000,
      "the app's figures",
    );
    expect(sample(text, 'hostd_app_info', { id: appId!, name: 'metered' })).to.equal(1);
    expect(sample(text, 'hostd_app_state', { id: appId!, state: 'running' })).to.equal(1);
    expect(sample(text, 'hostd_app_memory_bytes', labels)).to.be.greaterThan(0);
    expect(sample(text, 'hostd_app_cpu_seconds_total', labels)).to.be.greaterThan(0);
    for (const f of ['disk_read_bytes_total', 'disk_written_bytes_total', 'network_received_bytes_total', 'network_transmitted_bytes_total']) {
      expect(sample(text, `hostd_app_${f}`, labels), f).to.be.a('number');
    }
    const check = await promtool(text);
    expect(check.code, check.out).to.equal(0);
    const bare = (await d!.request('GET', '/api/v1/metrics', { token: systemOnly })).text;
    expect(bare).to.not.match(/^hostd_app_/m);
  });
});
