/**
 * The per-resource families and who sees them, on the service with ports
 * made here (the real runtimes' figures: test/integration/metrics/
 * resources.test.ts): a kind's series only for a token holding its read
 * scope, the name only in `_info`, sandboxes only as counts by state, and a
 * runtime read that never answers does not hold a scrape (it is counted as
 * late and its series are left out).
 */
import { expect } from 'chai';
import { MetricsService } from '../../../daemon/metrics/service.js';
import type { GuestInfo, GuestSource, LeaseView, MountStates, ProxyFigures, ResourceUsage, UsageSource } from '../../../daemon/domain.js';
import { sample } from '../../helpers/metrics.js';

const lease = {
  state: (): LeaseView => ({ holder: null, epoch: 0, holding: false }),
  onChange: () => () => {},
  move: async () => lease.state(),
  takeover: async () => lease.state(),
};

const guest = (kind: GuestInfo['kind'], id: string, name: string, state: string): GuestInfo => ({
  kind,
  id,
  name,
  state,
  running: state === 'running',
  cpu_cores: 1,
  memory_mb: 64,
  addresses: [],
});

const figures = (id: string, n: number): ResourceUsage => ({
  id,
  cpu_seconds: n,
  memory_bytes: n * 1000,
  disk_read_bytes: n * 10,
  disk_written_bytes: n * 20,
  network_received_bytes: n * 30,
  network_transmitted_bytes: null,
});

function service(guests: GuestSource[], usage: UsageSource[], more: { mounts?: MountStates[]; proxy?: ProxyFigures[] } = {}): MetricsService {
  const m = new MetricsService();
  m.attach({
    nodeId: 'n1',
    nodeName: 'a',
    version: '0',
    lease,
    peers: async () => [],
    domainInfo: async () => [],
    guests: () => guests,
    usage: () => usage,
    mountStates: () => more.mounts ?? [],
    proxyFigures: () => more.proxy ?? [],
  });
  return m;
}

describe('metrics: per-resource series', function () {
  const guests: GuestSource[] = [
    { guests: async () => [guest('lxc', '7', 'web', 'running'), guest('lxc', '8', 'db', 'stopped')] },
    { guests: async () => [guest('app', 'wiki', 'wiki', 'running')] },
    { guests: async () => [guest('vm', '101', 'build', 'stopped')] },
    {
      guests: async () => [
        guest('sandbox', 'sb_1', 'agent-a', 'ready'),
        guest('sandbox', 'sb_2', 'agent-b', 'ready'),
        guest('sandbox', 'sb_3', 'agent-c', 'booting'),
      ],
    },
  ];
  const usage: UsageSource[] = [
    { kind: 'lxc', usage: async () => [figures('7', 3)] },
    { kind: 'app', usage: async () => [figures('wiki', 5)] },
  ];

  it("shows a kind's series only to a token holding its read scope", async () => {
    const m = service(guests, usage);
    const only = (await m.expose('prometheus', { scopes: ['system.read'] })).text;
    expect(only).to.not.match(/^hostd_(lxc|app|vm)_/m);
    const lxc = (await m.expose('prometheus', { scopes: ['system.read', 'lxc.read'] })).text;
    expect(sample(lxc, 'hostd_lxc_cpu_seconds_total', { id: '7' })).to.equal(3);
    expect(lxc).to.not.match(/^hostd_(app|vm)_/m);
    const all = (await m.expose('prometheus', { scopes: ['system.read', 'lxc.read', 'apps.read', 'vm.read'] })).text;
    expect(sample(all, 'hostd_app_memory_bytes', { id: 'wiki' })).to.equal(5000);
    expect(sample(all, 'hostd_vm_state', { id: '101', state: 'stopped' })).to.equal(1);
    // OpenMetrics: one exposition with one end, the kind's families in it.
    const om = (await m.expose('openmetrics', { scopes: ['lxc.read'] })).text;
    expect(om.match(/^# EOF$/gm)).to.have.length(1);
    expect(om.trimEnd().endsWith('# EOF')).to.equal(true);
    expect(om).to.include('hostd_lxc_info{id="7",name="web"} 1');
    // The token-less audience: aggregates only.
    expect((await m.expose('prometheus', 'aggregates')).text).to.not.match(/^hostd_(lxc|app|vm)_/m);
  });

  it('labels figures by id only; the name is in _info, the state in _state; a stopped resource has no figures; a figure the runtime lacks is left out', async () => {
    const text = (await service(guests, usage).expose('prometheus', { scopes: ['lxc.read'] })).text;
    expect(sample(text, 'hostd_lxc_info', { id: '7', name: 'web' })).to.equal(1);
    expect(sample(text, 'hostd_lxc_info', { id: '8', name: 'db' })).to.equal(1);
    expect(sample(text, 'hostd_lxc_state', { id: '8', state: 'stopped' })).to.equal(1);
    expect(sample(text, 'hostd_lxc_memory_bytes', { id: '7' })).to.equal(3000);
    expect(sample(text, 'hostd_lxc_disk_read_bytes_total', { id: '7' })).to.equal(30);
    expect(sample(text, 'hostd_lxc_disk_written_bytes_total', { id: '7' })).to.equal(60);
    expect(sample(text, 'hostd_lxc_network_received_bytes_total', { id: '7' })).to.equal(90);
    expect(sample(text, 'hostd_lxc_network_transmitted_bytes_total', { id: '7' })).to.equal(undefined);
    expect(sample(text, 'hostd_lxc_cpu_seconds_total', { id: '8' })).to.equal(undefined);
    const figureLines = text.split('\n').filter((l) => /^hostd_lxc_(cpu|memory|disk|network)/.test(l));
    expect(figureLines).to.not.deep.equal([]);
    for (const l of figureLines) expect(l, l).to.match(/^[a-z_]+\{id="\d+"\} /);
  });

  it('counts sandboxes by state, never naming one', async () => {
    const text = (await service(guests, usage).expose('prometheus', { scopes: ['system.read', 'sandbox.read', 'vm.read'] })).text;
    expect(sample(text, 'hostd_sandboxes', { state: 'ready' })).to.equal(2);
    expect(sample(text, 'hostd_sandboxes', { state: 'booting' })).to.equal(1);
    expect(text).to.not.include('sb_1');
    expect(text).to.not.include('agent-a');
  });

  it('a runtime read that never answers does not hold the scrape: the other kinds are served, the late read is counted', async () => {
    const hung: UsageSource = { kind: 'app', usage: () => new Promise<ResourceUsage[]>(() => {}) };
    const m = service(guests, [usage[0], hung]);
    const text = (await m.expose('prometheus', { scopes: ['lxc.read', 'apps.read'] })).text;
    expect(sample(text, 'hostd_lxc_cpu_seconds_total', { id: '7' })).to.equal(3);
    expect(sample(text, 'hostd_app_cpu_seconds_total', { id: 'wiki' })).to.equal(undefined);
    expect(sample(text, 'hostd_app_info', { id: 'wiki', name: 'wiki' })).to.equal(1);
    // The count is rendered before the resources are read: the next scrape shows this one's.
    const next = (await m.expose('prometheus', { scopes: ['apps.read'] })).text;
    expect(sample(next, 'hostd_metrics_reads_late_total', { source: 'app' })).to.be.at.least(1);
  });

  it("a failing runtime read leaves that kind's figures out and the rest served", async () => {
    const failing: UsageSource = {
      kind: 'lxc',
      usage: async () => {
        throw new Error('cgroup gone');
      },
    };
    const text = (await service(guests, [failing, usage[1]]).expose('prometheus', { scopes: ['lxc.read', 'apps.read'] })).text;
    expect(sample(text, 'hostd_lxc_cpu_seconds_total', { id: '7' })).to.equal(undefined);
    expect(sample(text, 'hostd_app_cpu_seconds_total', { id: 'wiki' })).to.equal(5);
  });

  it("counts locations by status; the proxy's configuration versions for everyone with system.read, its certificates' expiry by domain only with proxy.read", async () => {
    const mounts: MountStates = { statuses: () => ['mounted', 'unavailable', 'mounted'] };
    let tell: Parameters<ProxyFigures['onApply']>[0] = () => {};
    const proxy: ProxyFigures = {
      config: () => ({ version: 7, applied_version: 6, apply_failed: true }),
      certificates: () => [
        { domain: 'home.test', not_after: '2030-01-01T00:00:00Z' },
        { domain: 'lab.test', not_after: null },
      ],
      onApply: (watch) => (tell = watch),
    };
    const m = service(guests, usage, { mounts: [mounts], proxy: [proxy] });
    // Each load the proxy reports is observed when it happens, not read at the scrape.
    tell('loaded', 0.02);
    tell('loaded', 0.3);
    tell('refused', 0.04);
    const text = (await m.expose('prometheus', { scopes: ['system.read'] })).text;
    expect(sample(text, 'hostd_proxy_config_apply_duration_seconds_count', { result: 'loaded' })).to.equal(2);
    expect(sample(text, 'hostd_proxy_config_apply_duration_seconds_sum', { result: 'loaded' })).to.be.closeTo(0.32, 1e-9);
    expect(sample(text, 'hostd_proxy_config_apply_duration_seconds_bucket', { result: 'loaded', le: '0.1' })).to.equal(1);
    expect(sample(text, 'hostd_proxy_config_apply_duration_seconds_count', { result: 'refused' })).to.equal(1);
    expect(sample(text, 'hostd_locations', { status: 'mounted' })).to.equal(2);
    expect(sample(text, 'hostd_locations', { status: 'unavailable' })).to.equal(1);
    expect(sample(text, 'hostd_locations', { status: 'disconnected' })).to.equal(0);
    expect(sample(text, 'hostd_proxy_config_version')).to.equal(7);
    expect(sample(text, 'hostd_proxy_config_applied_version')).to.equal(6);
    expect(sample(text, 'hostd_proxy_config_apply_failed')).to.equal(1);
    expect(text).to.not.include('home.test');
    const withProxy = (await m.expose('prometheus', { scopes: ['system.read', 'proxy.read'] })).text;
    expect(sample(withProxy, 'hostd_proxy_certificate_expiry_timestamp_seconds', { domain: 'home.test' })).to.equal(Date.parse('2030-01-01T00:00:00Z') / 1000);
    expect(sample(withProxy, 'hostd_proxy_certificate_expiry_timestamp_seconds', { domain: 'lab.test' })).to.equal(undefined);
    // A build without the locations or proxy domain: no location counts, no certificate, the versions 0.
    const bare = (await service(guests, usage).expose('prometheus', { scopes: ['proxy.read'] })).text;
    expect(sample(bare, 'hostd_locations', { status: 'mounted' })).to.equal(undefined);
    expect(sample(bare, 'hostd_proxy_config_version')).to.equal(0);
    expect(bare).to.not.match(/^hostd_proxy_certificate_expiry_timestamp_seconds\{/m);
  });
});
