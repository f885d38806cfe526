/**
 * Failover that clients feel: three hostd nodes in network
 * namespaces, a client in its own namespace, an upstream HTTP server, an
 * entry with cert_source internal and a floating address. The client keeps
 * requesting https://web.<domain>/ through the floating address while the
 * proxy moves between live nodes and while the holder is killed and another
 * node takes over. `ip monitor address` in every node namespace proves that
 * no two nodes ever had the floating address at once; the client's answers
 * (the upstream names the node that proxied each) never go back to the old
 * holder after the new one answered. The gaps are printed (the bench
 * reports them as figures).
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { startDaemon, eventually, tempDir, type TestDaemon } from '../../helpers/daemon.js';
import { pair } from '../../cluster/util.js';
import { LAN_DEV, ProxyLab, type ClientLoop, type VipWatch } from '../../helpers/proxy-lab.js';
import { labMissing, proxyAvailability, proxyNodeEnv, proxyYaml } from '../../helpers/proxy-node.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { headCursor, stateEventsUntil } from '../../helpers/state-events.js';

describe('proxy failover across three nodes (network namespaces)', function () {
  this.timeout(180_000);
  let lab: ProxyLab;
  let nodes: TestDaemon[] = [];
  const tokens: string[] = [];
  let client: ClientLoop | undefined;
  let watch: VipWatch;
  const DOMAIN = 'lab.test';
  const gaps: Record<string, number> = {};

  const req = (i: number, method: string, p: string, body?: unknown) => nodes[i].request(method, `/api/v1${p}`, { token: tokens[i], body });
  const status = async (i: number) => (await req(i, 'GET', '/proxy/host-status')).body;

  before(async function () {
    await requireRuntime(this, 'proxy', proxyAvailability, { also: labMissing });
    lab = new ProxyLab(3);
    await lab.setup();
    const upstream = await lab.startUpstream(8080);
    // One at a time: three starts at once on a loaded 2-core machine can each take longer than the helper's start bound.
    nodes = [];
    for (const [i, n] of lab.nodes.entries())
      nodes.push(await startDaemon({ netns: n.ns, env: proxyNodeEnv(n.addr, `px-node-${i + 1}`), configYaml: proxyYaml(n.addr) }));
    await pair(nodes);
    for (const [i, d] of nodes.entries()) tokens[i] = await d.token(`px-${i + 1}`, ['proxy.read', 'proxy.manage', 'system.read']);
    expect((await req(0, 'PATCH', '/proxy', { enabled: true })).status).to.equal(200);
    expect((await req(0, 'POST', '/proxy/domains', { name: DOMAIN, cert_source: 'internal' })).status).to.equal(201);
    const [uh, up] = upstream.split(':');
    expect((await req(0, 'POST', `/proxy/domains/${DOMAIN}/entries`, { subdomain: 'web', host: uh, port: Number(up) })).status).to.equal(201);
    const vip = await req(0, 'PUT', '/proxy/vip', { vip: lab.vip, vip_iface: LAN_DEV, vip_prefix: 24 });
    expect(vip.status, vip.text).to.equal(200);
    // Serve once on each node first (each issues its certificates), as a cluster that has run a while has.
    for (const i of [1, 2, 0]) {
      const mv = await req(0, 'POST', '/proxy/move', { peer_id: nodes[i].nodeId });
      expect(mv.status, mv.text).to.equal(200);
      await eventually(async () => (await status(i)).vip.claimed && (await status(i)).applied_version !== null, 20_000, `node ${i + 1} serving`);
    }
    // The internal CA's root is the same on every member: the client trusts only the root the
    // first holder reports, and every move and takeover below must still be answered over TLS.
    const certs = await req(0, 'GET', '/proxy/certs');
    expect(certs.status, certs.text).to.equal(200);
    const bundle = path.join(tempDir('hostd-proxy-ca-'), 'roots.pem');
    fs.writeFileSync(bundle, certs.body.internal_ca.root_pem);
    watch = lab.watchVip(nodes.map((d) => d.nodeId));
    client = lab.startClient({ url: `https://web.${DOMAIN}/`, resolve: lab.vip, ca: bundle, intervalMs: 20 });
    await client.okAfter(Date.now());
  });

  after(async () => {
    await client?.stop();
    await Promise.all(nodes.map((d) => d.stop()));
    await lab?.cleanup();
    if (Object.keys(gaps).length) console.log(`      client gaps (ms): ${JSON.stringify(gaps)}`);
    const errs: Record<string, number> = {};
    for (const s of client?.samples ?? []) if (!s.ok) errs[s.err ?? String(s.status)] = (errs[s.err ?? String(s.status)] ?? 0) + 1;
    if (Object.keys(errs).length) console.log(`      client failures: ${JSON.stringify(errs)}`);
  });

  const viaOf = (i: number) => lab.nodes[i].addr;
  /** The `proxy.state` events of node `i` after `cursor`, once there are `n` (with no more in the same pages). */
  const proxyStates = async (i: number, cursor: string, n: number, what: string) =>
    (await stateEventsUntil(nodes[i], tokens[i], 'proxy', 'proxy', cursor, (e) => e.length >= n, what)).events;
  /** Node 3's cursor before it was killed: its restart reports from there. */
  let beforeKill = '';

  /** After the first answer through `to`, no answer comes through `from` again. */
  function neverBack(t0: number, from: number, to: number): void {
    const after = client!.samples.filter((s) => s.t > t0 && s.ok);
    const first = after.findIndex((s) => s.via === viaOf(to));
    expect(first, 'the new holder answered').to.be.greaterThan(-1);
    const back = after.slice(first).filter((s) => s.via === viaOf(from));
    expect(back, `answers from node ${from + 1} after node ${to + 1} answered`).to.deep.equal([]);
  }

  it('moves between live nodes: the client follows the floating address, never two holders', async () => {
    for (const [from, to, caller] of [
      [0, 1, 0],
      [1, 2, 0],
    ] as const) {
      await client!.okAfter(Date.now());
      const t0 = Date.now();
      const [cFrom, cTo] = [await headCursor(nodes[from], tokens[from]), await headCursor(nodes[to], tokens[to])];
      const mv = await req(caller, 'POST', '/proxy/move', { peer_id: nodes[to].nodeId });
      expect(mv.status, mv.text).to.equal(200);
      expect(mv.body).to.include({ holder: nodes[to].nodeId });
      // The member that lost the lease says so; the new holder says it serves.
      const lost = await proxyStates(from, cFrom, 1, `node ${from + 1}'s state event`);
      expect(lost.map((e) => e.data)).to.deep.equal([{ state: 'stopped', reason: 'lease-lost', holder: nodes[to].nodeId }]);
      const won = await proxyStates(to, cTo, 1, `node ${to + 1}'s state event`);
      expect(won.map((e) => e.data.state)).to.deep.equal(['serving']);
      await eventually(() => client!.samples.find((s) => s.t > t0 && s.ok && s.via === viaOf(to)), 30_000, `an answer through node ${to + 1}`);
      await new Promise((r) => setTimeout(r, 500));
      neverBack(t0, from, to);
      gaps[`move_${from + 1}_to_${to + 1}`] = Math.round(client!.switchGap(t0, (v) => v === viaOf(to)).gapMs);
      expect(watch.overlaps()).to.deep.equal([]);
      expect(watch.holders()).to.deep.equal([nodes[to].nodeId]);
    }
  });

  it('the holder is killed: another node takes over by itself, the client is answered again', async () => {
    await client!.okAfter(Date.now());
    const t0 = Date.now();
    beforeKill = await headCursor(nodes[2], tokens[2]);
    await nodes[2].kill();
    // Requests that started just before Caddy died with hostd may still be answered by node 3.
    const s = await eventually(() => client!.samples.find((x) => x.t > t0 && x.ok && x.via !== viaOf(2)), 60_000, 'an answer after the takeover');
    expect(s.via).to.be.oneOf([viaOf(0), viaOf(1)]);
    await new Promise((r) => setTimeout(r, 500));
    neverBack(t0, 2, s.via === viaOf(0) ? 0 : 1);
    gaps.takeover = Math.round(client!.switchGap(t0, (v) => v === s.via).gapMs);
    expect(watch.overlaps()).to.deep.equal([]);
    const newHolder = s.via === viaOf(0) ? 0 : 1;
    expect(watch.holders()).to.deep.equal([nodes[newHolder].nodeId]);
    // The takeover left an incident bundle on the new holder.
    const inc = await req(newHolder, 'GET', '/proxy/incidents');
    expect(inc.body.incidents.map((x: any) => x.kind)).to.include('takeover');
  });

  it('the killed node restarts without the floating address and without Caddy', async () => {
    const n = lab.nodes[2];
    nodes[2] = await startDaemon({ dataDir: nodes[2].dataDir, netns: n.ns, env: proxyNodeEnv(n.addr, 'px-node-3'), configYaml: proxyYaml(n.addr) });
    await eventually(async () => (await status(2)).holder !== nodes[2].nodeId, 20_000, 'the restarted node to learn the new holder');
    // It served when it was killed: the start reports, once, that the lease went elsewhere meanwhile.
    const events = await proxyStates(2, beforeKill, 1, "the restarted node's state event");
    expect(events.map((e) => [e.data.state, e.data.reason])).to.deep.equal([['stopped', 'lease-lost']]);
    const st = await status(2);
    expect(st).to.include({ serving: false, caddy_running: false });
    expect(st.vip.claimed).to.equal(false);
    const r = await lab.exec(n.ns, ['ip', '-j', 'addr', 'show', 'dev', LAN_DEV]);
    expect(r.stdout).to.not.include(lab.vip);
    await client!.okAfter(Date.now());
    expect(watch.overlaps()).to.deep.equal([]);
  });
});
