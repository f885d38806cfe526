/**
 * The replicated proxy configuration: what validation accepts and refuses
 * (credentials never in it), and GET /proxy/config's view of it and of the
 * lease on each member.
 */
import { expect } from 'chai';
import { ApiError, notFound } from '../../../daemon/lib/errors.js';
import { defaultProxyConfig, proxyConfigView, validateProxyConfig, type ProxyConfig, type ProxyConfigSnapshot } from '../../../daemon/proxy/config.js';
import { LeaseNet } from '../../helpers/lease-net.js';

async function rejection(p: Promise<unknown>): Promise<ApiError> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(ApiError);
    return err as ApiError;
  }
  throw new Error('expected a rejection');
}

const addDomain =
  (name: string, cert_source = 'internal') =>
  (c: ProxyConfig): ProxyConfig => ({
    ...c,
    domains: [...c.domains, { name, cert_source, entries: [] }],
  });

function versions(net: LeaseNet): Record<string, number> {
  const out: Record<string, number> = {};
  for (const n of net.nodes.values()) if (n.up) out[n.id] = n.config.get().version;
  return out;
}

describe('replicated proxy configuration', function () {
  let net: LeaseNet;

  afterEach(async () => {
    await net?.close();
  });

  it('starts at version 0 with the default configuration', async () => {
    net = await LeaseNet.create(2);
    expect(net.config('n1').get()).to.deep.equal({ version: 0, config: defaultProxyConfig() });
    expect(defaultProxyConfig()).to.deep.equal({ enabled: false, http3: false, domains: [], acme: null, vip: null, dns_upstreams: [] });
  });

  it('pushes an update to every member with a bumped version', async () => {
    net = await LeaseNet.create(3, { delay: 3 });
    const seen: ProxyConfigSnapshot[] = [];
    net.config('n3').onChange((s) => seen.push(s));
    const res = await net.config('n1').update(addDomain('home.example'));
    expect(res.version).to.equal(1);
    expect(res.pushed).to.deep.equal(['n2', 'n3']);
    expect(res.unreachable).to.deep.equal([]);
    for (const id of net.ids) {
      expect(net.config(id).get().version).to.equal(1);
      expect(net.config(id).get().config.domains).to.deep.equal([{ name: 'home.example', cert_source: 'internal', entries: [] }]);
    }
    expect(seen.map((s) => s.version)).to.deep.equal([1]);

    const r2 = await net.config('n2').update((c) => ({ ...c, enabled: true, http3: true, dns_upstreams: ['9.9.9.9'] }));
    expect(r2.version).to.equal(2);
    expect(net.config('n3').get().config).to.include({ enabled: true, http3: true });
    expect(net.config('n1').get().config.domains).to.have.length(1);
  });

  it('get() returns a copy and a throwing mutator changes nothing', async () => {
    net = await LeaseNet.create(2);
    const snap = net.config('n1').get();
    snap.config.domains.push({ name: 'x', cert_source: 'internal', entries: [] });
    expect(net.config('n1').get().config.domains).to.deep.equal([]);
    const e = await rejection(
      net.config('n1').update(() => {
        throw notFound("no domain 'y'");
      }),
    );
    expect(e.status).to.equal(404);
    expect(versions(net)).to.deep.equal({ n1: 0, n2: 0 });
  });

  it('members adopt only newer versions; equal versions are ordered by the writer id', async () => {
    net = await LeaseNet.create(3);
    const c = net.config('n2');
    const cfg = (n: string) => addDomain(n)(defaultProxyConfig());
    expect(await c.handle({ type: 'push', from: 'n1', version: 3, origin: 'n1', config: cfg('a') })).to.include({ adopted: true, version: 3 });
    // older or same: not adopted, and the reply carries the newer copy back
    const older = (await c.handle({ type: 'push', from: 'n3', version: 2, origin: 'n3', config: cfg('b') })) as {
      adopted: boolean;
      version: number;
      config: ProxyConfig;
    };
    expect(older.adopted).to.equal(false);
    expect(older.version).to.equal(3);
    expect(older.config.domains[0]!.name).to.equal('a');
    expect(await c.handle({ type: 'push', from: 'n1', version: 3, origin: 'n1', config: cfg('a') })).to.include({ adopted: false, config: null });
    // same version, higher origin wins (so concurrent writers converge to one copy)
    expect(await c.handle({ type: 'push', from: 'n3', version: 3, origin: 'n3', config: cfg('c') })).to.include({ adopted: true });
    expect(await c.handle({ type: 'push', from: 'n1', version: 3, origin: 'n1', config: cfg('a') })).to.include({ adopted: false });
    expect(c.get().config.domains[0]!.name).to.equal('c');
    expect(await c.handle({ type: 'push', from: 'n1', version: 4, origin: 'n1', config: cfg('d') })).to.include({ adopted: true });
    expect(c.get()).to.deep.include({ version: 4 });
  });

  it('a node that missed pushes catches up by sync()', async () => {
    net = await LeaseNet.create(3, { delay: 2 });
    net.partition(['n3'], ['n1', 'n2']);
    const r1 = await net.config('n1').update(addDomain('a.example'));
    expect(r1.unreachable).to.deep.equal(['n3']);
    await net.config('n2').update(addDomain('b.example'));
    await net.config('n1').update((c) => ({ ...c, enabled: true }));
    expect(versions(net)).to.deep.equal({ n1: 3, n2: 3, n3: 0 });
    net.heal();
    const s = await net.config('n3').sync();
    expect(s.version).to.equal(3);
    expect(s.config.domains.map((d) => d.name)).to.deep.equal(['a.example', 'b.example']);
    expect(s.config.enabled).to.equal(true);
    // a node that was down catches up after restart
    await net.kill('n2');
    await net.config('n1').update(addDomain('c.example'));
    await net.restart('n2');
    expect(net.config('n2').get().version).to.equal(3); // kept what it stored
    await net.config('n2').sync();
    expect(versions(net)).to.deep.equal({ n1: 4, n2: 4, n3: 4 });
  });

  it('a stale node updating without sync re-applies its change on top of the newer copy', async () => {
    net = await LeaseNet.create(3, { delay: 2 });
    net.partition(['n3'], ['n1', 'n2']);
    await net.config('n1').update(addDomain('a.example'));
    await net.config('n1').update(addDomain('b.example'));
    net.heal();
    const r = await net.config('n3').update(addDomain('c.example'));
    expect(r.version).to.equal(3);
    expect(r.config.domains.map((d) => d.name)).to.deep.equal(['a.example', 'b.example', 'c.example']);
    await net.config('n1').sync();
    expect(versions(net)).to.deep.equal({ n1: 3, n2: 3, n3: 3 });
    expect(net.config('n2').get().config.domains).to.have.length(3);
  });

  it('concurrent updates on two nodes both survive and every node converges', async () => {
    net = await LeaseNet.create(3, { delay: 5 });
    await Promise.all([net.config('n1').update(addDomain('one.example')), net.config('n2').update(addDomain('two.example'))]);
    for (const id of net.ids) await net.config(id).sync();
    const copies = net.ids.map((id) => net.config(id).get());
    expect(copies[1]).to.deep.equal(copies[0]);
    expect(copies[2]).to.deep.equal(copies[0]);
    expect(copies[0]!.config.domains.map((d) => d.name).sort()).to.deep.equal(['one.example', 'two.example']);
  });

  it('keeps its copy across a restart', async () => {
    net = await LeaseNet.create(2);
    await net.config('n1').update(addDomain('a.example'));
    await net.restart('n1');
    await net.restart('n2');
    expect(net.config('n1').get().version).to.equal(1);
    expect(net.config('n2').get().config.domains[0]!.name).to.equal('a.example');
  });

  it('refuses malformed messages, non-members and credentials in the replicated object', async () => {
    net = await LeaseNet.create(2);
    const c = net.config('n1');
    const good = defaultProxyConfig();
    const bad: unknown[] = [
      null,
      { type: 'push', from: 'n2', version: 0, origin: 'n2', config: good },
      { type: 'push', from: 'n2', version: 1, origin: '', config: good },
      { type: 'push', from: 'n2', version: 1, origin: 'n2', config: { ...good, enabled: 'yes' } },
      {
        type: 'push',
        from: 'n2',
        version: 1,
        origin: 'n2',
        config: { ...good, acme: { email: 'a@b', dir_url: '', dns_resolvers: null, credentials: { token: 'x' } } },
      },
      { type: 'push', from: 'n2', version: 1, origin: 'n2', config: { ...good, cloudflare_api_token: 'x' } },
      {
        type: 'push',
        from: 'n2',
        version: 1,
        origin: 'n2',
        config: { ...good, vip: { vip: '10.0.0.5', vip_iface: 'eth0', vip_prefix: 40, vip6: null, vip6_prefix: null } },
      },
      { type: 'fetch', from: 'n2' },
    ];
    for (const m of bad) expect((await rejection(c.handle(m))).status, JSON.stringify(m)).to.equal(400);
    expect((await rejection(c.handle({ type: 'pull', from: 'intruder' }))).status).to.equal(403);
    const e = await rejection(c.update((x) => ({ ...x, acme: { email: 'a@b', dir_url: '', dns_resolvers: null, secret: 'x' } as never })));
    expect(e.status).to.equal(400);
    expect(e.message).to.match(/secret store/);
    expect(c.get().version).to.equal(0);
    // a full, valid configuration passes
    const full: ProxyConfig = {
      enabled: true,
      http3: false,
      domains: [
        {
          name: 'home.example',
          cert_source: 'cloudflare',
          entries: [
            {
              subdomain: 'git',
              port: 3000,
              host: '10.0.0.9',
              target_id: null,
              listen_port: 443,
              upstream_scheme: '',
              tls_skip_verify: null,
              header_up: { 'X-Real-IP': '{remote_host}' },
            },
          ],
        },
      ],
      acme: { email: 'ops@home.example', dir_url: '', dns_resolvers: ['1.1.1.1'] },
      vip: { vip: '10.0.0.5', vip_iface: 'eth0', vip_prefix: 24, vip6: null, vip6_prefix: null },
      dns_upstreams: ['9.9.9.9'],
    };
    expect(validateProxyConfig(full)).to.deep.equal(full);
    const r = await c.update(() => full);
    expect(r.version).to.equal(1);
    expect(net.config('n2').get().config).to.deep.equal(full);
  });

  it('proxyConfigView shows holder, epoch, whether it holds here, and the versioned config', async () => {
    net = await LeaseNet.create(3);
    await net.bootstrap('n1');
    await net.config('n2').update((c) => ({ ...c, enabled: true }));
    expect(proxyConfigView(net.lease('n1'), net.config('n1'), 'n1')).to.deep.equal({
      holder: 'n1',
      epoch: 1,
      holding_here: true,
      version: 1,
      config: { ...defaultProxyConfig(), enabled: true },
    });
    await net.lease('n3').move('n2');
    const v = proxyConfigView(net.lease('n2'), net.config('n2'), 'n2');
    expect(v).to.include({ holder: 'n2', epoch: 2, holding_here: true, version: 1 });
    await net.lease('n1').sync();
    expect(proxyConfigView(net.lease('n1'), net.config('n1'), 'n1')).to.include({ holder: 'n2', epoch: 2, holding_here: false });
  });

  it('proxyConfigView on a node outside a cluster names it the holder, as host-status does (no lease there)', async () => {
    net = await LeaseNet.create(1);
    expect(net.lease('n1').state().holder).to.equal(null);
    expect(proxyConfigView(net.lease('n1'), net.config('n1'), 'n1', true)).to.include({ holder: 'n1', holding_here: true });
    expect(proxyConfigView(net.lease('n1'), net.config('n1'), 'n1')).to.include({ holder: null, holding_here: false });
  });

  it('start() keeps a member in sync on a timer', async () => {
    net = await LeaseNet.create(2);
    net.partition(['n1'], ['n2']);
    await net.config('n1').update(addDomain('a.example'));
    net.heal();
    net.config('n2').start(30);
    const deadline = Date.now() + 2000;
    while (net.config('n2').get().version < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    net.config('n2').stop();
    expect(net.config('n2').get().version).to.equal(1);
  });
});
