/**
 * Crash safety of the proxy's data plane: hostd killed (SIGKILL) at a step
 * of a change it journals (HOSTD_TEST_PAUSE_AT=proxy.<step>) leaves nothing
 * behind that the next start does not undo: the floating address goes with
 * hostd (its guard), Caddy dies with it (pdeathsig), the restart settles the
 * open intent and then claims or starts exactly one of each. In a lab of
 * network namespaces (test/helpers/proxy-lab.ts).
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';
import { startDaemon, eventually, type TestDaemon } from '../../helpers/daemon.js';
import { LAN_DEV, ProxyLab } from '../../helpers/proxy-lab.js';
import { labMissing, proxyAvailability, proxyNodeEnv, proxyYaml } from '../../helpers/proxy-node.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';

describe('proxy crash safety (kill -9 at a step)', function () {
  this.timeout(120_000);
  let lab: ProxyLab;
  let d: TestDaemon | undefined;

  before(async function () {
    await requireRuntime(this, 'proxy', proxyAvailability, { also: labMissing });
    lab = new ProxyLab(1);
    await lab.setup();
  });

  after(async () => {
    await d?.stop();
    await lab?.cleanup();
  });

  const caddyOf = (dataDir: string) =>
    fs
      .readdirSync('/proc')
      .filter((p) => /^\d+$/.test(p))
      .filter((p) => {
        try {
          return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(path.join(dataDir, 'proxy/run/caddy-boot.json'));
        } catch {
          return false;
        }
      });
  const addrs = async () => (await lab.exec(lab.nodes[0].ns, ['ip', '-j', 'addr', 'show', 'dev', LAN_DEV])).stdout;

  it('killed after the floating address was added but before it was recorded: the address goes with hostd; the restart settles the intent, then claims it once', async () => {
    const n = lab.nodes[0];
    d = await startDaemon({
      netns: n.ns,
      env: { ...proxyNodeEnv(n.addr, 'px-crash'), HOSTD_TEST_PAUSE_AT: 'proxy.vip-claimed' },
      configYaml: proxyYaml(n.addr),
    });
    const token = await d.token('px', ['proxy.read', 'proxy.manage']);
    expect((await d.request('PATCH', '/api/v1/proxy', { token, body: { enabled: true } })).status).to.equal(200);
    expect((await d.request('PUT', '/api/v1/proxy/vip', { token, body: { vip: lab.vip, vip_iface: LAN_DEV, vip_prefix: 24 } })).status).to.equal(200);
    await eventually(() => d!.logs.some((l) => isPauseLine(l, 'proxy.vip-claimed')), 10_000, 'the pause after the address was added');
    expect(await addrs()).to.include(`"${lab.vip}"`);
    const dataDir = d.dataDir;
    await d.kill();
    // Caddy went with hostd (pdeathsig), and so did the address: its guard was armed before it was added.
    await eventually(() => caddyOf(dataDir).length === 0, 5000, 'caddy gone with hostd');
    await eventually(async () => !(await addrs()).includes(`"${lab.vip}"`), 5000, 'the guard to take the address off');
    d = await startDaemon({ dataDir, netns: n.ns, env: proxyNodeEnv(n.addr, 'px-crash'), configYaml: proxyYaml(n.addr) });
    expect(d.logs.find((l) => l.msg === 'proxy: undid what the last run left on the host')).to.include({ intents: 1, vip: true });
    await eventually(async () => (await d!.request('GET', '/api/v1/proxy/host-status', { token })).body.vip.claimed, 10_000, 'claimed again');
    expect((await addrs()).split(`"${lab.vip}"`).length - 1).to.equal(1);
    expect(caddyOf(dataDir).length).to.be.greaterThan(0);
  });

  it('killed after Caddy started but before it was recorded: Caddy dies with hostd; the restart starts exactly one', async () => {
    const n = lab.nodes[0];
    const dataDir = d!.dataDir;
    await d!.stop();
    expect(caddyOf(dataDir)).to.deep.equal([]);
    d = await startDaemon({
      dataDir,
      netns: n.ns,
      env: { ...proxyNodeEnv(n.addr, 'px-crash'), HOSTD_TEST_PAUSE_AT: 'proxy.caddy-started' },
      configYaml: proxyYaml(n.addr),
    });
    await eventually(() => d!.logs.some((l) => isPauseLine(l, 'proxy.caddy-started')), 10_000, 'the pause after Caddy started');
    expect(caddyOf(dataDir).length).to.be.greaterThan(0);
    await d.kill();
    await eventually(() => caddyOf(dataDir).length === 0, 5000, 'caddy gone with hostd');
    d = await startDaemon({ dataDir, netns: n.ns, env: proxyNodeEnv(n.addr, 'px-crash'), configYaml: proxyYaml(n.addr) });
    expect(d.logs.find((l) => l.msg === 'proxy: undid what the last run left on the host')).to.include({ intents: 1 });
    const token = await d.token('px2', ['proxy.read']);
    await eventually(async () => (await d!.request('GET', '/api/v1/proxy/host-status', { token })).body.caddy_running, 10_000, 'caddy running again');
    // setpriv execs caddy: one process per Caddy.
    expect(caddyOf(dataDir).length).to.equal(1);
  });
});
