/**
 * `hostctl lxc create|delete` against real LXC: the create's id alone on
 * stdout (what a script captures), the container in `hostctl lxc list`, a bad
 * argument refused by the daemon with its message and nothing made, and
 * delete removing it.
 */
import { expect } from 'chai';
import { hostctl } from '../../helpers/daemon.js';
import { cleanupLxc, lxcEnv, requireLxc, type LxcEnv } from '../../helpers/lxc-env.js';

describe('lxc runtime: hostctl lxc create and delete', function () {
  this.timeout(180_000);
  let env: LxcEnv;
  const ctl = (...args: string[]) => hostctl(env.d.dataDir, args);

  before(async function () {
    await requireLxc(this);
    env = await lxcEnv();
  });
  after(async () => {
    await cleanupLxc();
  });

  it('creates a container from key=value words, prints only its id, lists it and deletes it', async () => {
    const made = await ctl('lxc', 'create', 'name=from-hostctl', 'template=bb', 'memory_mb=64');
    expect(made.code, made.stderr).to.equal(0);
    expect(made.stdout).to.match(/^\d+\n$/);
    const id = Number(made.stdout.trim());
    const got = await env.req('GET', `/lxc/${id}`);
    expect(got.status).to.equal(200);
    expect(got.body.container).to.include({ lxcid: id, name: 'from-hostctl', memory_mb: 64 });
    const list = await ctl('lxc', 'list');
    expect(list.stdout).to.match(new RegExp(`^${id}\\s+from-hostctl\\s`, 'm'));
    const gone = await ctl('lxc', 'delete', String(id));
    expect(gone.code, gone.stderr).to.equal(0);
    expect(gone.stdout).to.equal(`deleted ${id}\n`);
    expect((await env.req('GET', `/lxc/${id}`)).status).to.equal(404);
  });

  it('refuses what the daemon refuses, with its message, and makes nothing', async () => {
    const before = (await env.req('GET', '/lxc')).body.containers.length;
    const bad = await ctl('lxc', 'create', 'name=bad', 'template=bb', 'memory_mb=-5');
    expect(bad.code).to.equal(1);
    expect(bad.stdout).to.equal('');
    expect(bad.stderr).to.match(/^hostctl: .*memory_mb/);
    const word = await ctl('lxc', 'create', 'name');
    expect(word.code).to.equal(2);
    expect(word.stderr).to.include("expected key=value, got 'name'");
    expect((await env.req('GET', '/lxc')).body.containers.length).to.equal(before);
  });
});
