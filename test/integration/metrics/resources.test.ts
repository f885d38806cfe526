/**
 * Per-resource series of a real LXC container (its cgroup files read by the
 * LXC domain's usage port): the figures of a running container under its id,
 * its name only in hostd_lxc_info (a rename changes that series alone), all
 * of it only for a token that also holds lxc.read, and promtool accepts the
 * exposition with these families in it.
 */
import { expect } from 'chai';
import { cleanupLxc, lxcEnv, requireLxc, type LxcEnv } from '../../helpers/lxc-env.js';
import { eventually } from '../../helpers/daemon.js';
import { API, raw } from '../../helpers/conformance.js';
import { sample } from '../../helpers/metrics.js';
import { promtool } from './promtool.js';

describe('metrics: per-resource series of a real LXC container', function () {
  this.timeout(180_000);
  let env: LxcEnv;
  let id: number;
  let withLxc: string;
  let systemOnly: string;

  before(async function () {
    await requireLxc(this);
    env = await lxcEnv();
    withLxc = await env.d.token('scraper-lxc', ['system.read', 'lxc.read']);
    systemOnly = await env.d.token('scraper-system', ['system.read']);
    const c = await env.req('POST', '/lxc', { name: 'metered', template: 'bb' });
    expect(c.status, JSON.stringify(c.body)).to.equal(201);
    id = c.body.container.lxcid;
    const s = await env.req('POST', `/lxc/${id}/start`);
    expect(s.status, JSON.stringify(s.body)).to.equal(200);
  });
  after(cleanupLxc);

  const scrape = async (token: string) => {
    const r = await raw(env.d.url, 'GET', `${API}/metrics`, { token });
    expect(r.status).to.equal(200);
    return r.text;
  };

  it("serves a running container's state, CPU seconds, memory, disk and network figures under its id; promtool accepts it", async () => {
    const labels = { id: String(id) };
    const text = await eventually(
      async () => {
        const t = await scrape(withLxc);
        return (sample(t, 'hostd_lxc_cpu_seconds_total', labels) ?? 0) > 0 ? t : undefined;
      },
      60_000,
      "the container's CPU seconds",
    );
    expect(sample(text, 'hostd_lxc_state', { id: String(id), state: 'running' })).to.equal(1);
    expect(sample(text, 'hostd_lxc_info', { id: String(id), name: 'metered' })).to.equal(1);
    expect(sample(text, 'hostd_lxc_memory_bytes', labels)).to.be.greaterThan(0);
    for (const f of ['disk_read_bytes_total', 'disk_written_bytes_total', 'network_received_bytes_total', 'network_transmitted_bytes_total']) {
      expect(sample(text, `hostd_lxc_${f}`, labels), f).to.be.a('number');
    }
    const check = await promtool(text);
    expect(check.code, check.out).to.equal(0);
  });

  it('a rename changes hostd_lxc_info alone: the figures keep their series', async () => {
    const r = await env.req('PATCH', `/lxc/${id}`, { new_name: 'renamed' });
    expect(r.status, JSON.stringify(r.body)).to.equal(200);
    const text = await eventually(
      async () => {
        const t = await scrape(withLxc);
        return sample(t, 'hostd_lxc_info', { id: String(id), name: 'renamed' }) === 1 ? t : undefined;
      },
      30_000,
      'the new name in hostd_lxc_info',
    );
    expect(sample(text, 'hostd_lxc_info', { id: String(id), name: 'metered' })).to.equal(undefined);
    const figures = text.split('\n').filter((l) => /^hostd_lxc_(cpu|memory|disk|network)/.test(l));
    expect(figures).to.not.deep.equal([]);
    for (const l of figures) expect(l).to.not.include('renamed');
  });

  it('a token without lxc.read sees no container series, only the aggregates', async () => {
    const text = await scrape(systemOnly);
    expect(text).to.not.match(/^hostd_lxc_/m);
    expect(text).to.include('# TYPE hostd_runtime_available gauge');
  });
});
