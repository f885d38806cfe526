/**
 * hostctl for every day, against a real daemon: the verbs of `hostctl vm`
 * and `hostctl lxc` (tables, --json, --peer), a group's and an operation's
 * own help, `token create --scopes all` and `token list --json` through the
 * token operations, bash completion, and --url/--token making hostctl a
 * client of the API as a token, which reaches what that token reaches.
 */
import { expect } from 'chai';
import { hostctl, runCommand, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { ALL_SCOPES } from '../../api/registry/index.js';
import { remoteOf } from '../../daemon/cli/hostctl.js';

const HOSTCTL = new URL('../../daemon/cli/hostctl.js', import.meta.url).pathname;

describe('hostctl for every day', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let dir: string;
  const ctl = (...args: string[]) => hostctl(dir, args);
  /** hostctl as a network client: no data dir, only a URL and a token. */
  const remote = (token: string, ...args: string[]) => runCommand(process.execPath, [HOSTCTL, '--url', d.url, '--token', token, ...args]);

  before(async () => {
    dir = tempDir('hostd-hostctl-');
    d = await startDaemon({ dataDir: dir });
  });
  after(async () => {
    await d?.stop();
  });

  it("prints a group's help and an operation's help, not the global usage", async () => {
    const vm = await ctl('vm', '--help');
    expect(vm.code, vm.stderr).to.equal(0);
    expect(vm.stdout).to.include('usage: hostctl vm image');
    expect(vm.stdout).to.match(/vm exec ID \[--timeout S\] \[--json\] -- COMMAND\.\.\.\s+vms_exec/);
    expect(vm.stdout).to.include('vm restart ID [--json]');
    expect(vm.stdout).to.not.include('token create');
    const apps = await ctl('apps', '--help');
    expect(apps.code).to.equal(0);
    expect(apps.stdout).to.include('usage: hostctl apps');
    // `app` is `apps` (whatever the engine answers here, both answer the same).
    const [app, appsList] = [await ctl('app', 'list'), await ctl('apps', 'list')];
    expect([app.code, app.stdout, app.stderr]).to.deep.equal([appsList.code, appsList.stdout, appsList.stderr]);
    expect((await ctl('app', '--help')).stdout).to.equal(apps.stdout);
    const op = await ctl('call', 'vms_stop', '--help');
    expect(op.code, op.stderr).to.equal(0);
    expect(op.stdout).to.include('POST /api/v1/vms/{id}/stop');
    expect(op.stdout).to.match(/^ {2}id\* \(integer\)/m);
    expect(op.stdout).to.match(/^ {2}force \(boolean\)/m);
    const unknown = await ctl('call', 'vms_nothing', '--help');
    expect(unknown.code).to.equal(2);
    expect(unknown.stderr).to.include("unknown operation 'vms_nothing'");
  });

  it('lists VMs and containers as tables or as the API answers them, and says what the daemon refused', async () => {
    const table = await ctl('vm', 'list');
    expect(table.code, table.stderr).to.equal(0);
    expect(table.stdout.split('\n')[0]).to.match(/^VMID\s+NAME\s+STATE\s+CPU\s+MEMORY MB\s+DISK GB\s+IMAGE$/);
    const json = await ctl('lxc', 'list', '--json');
    expect(json.code, json.stderr).to.equal(0);
    expect(JSON.parse(json.stdout)).to.have.property('containers').that.is.an('array');
    const missing = await ctl('vm', 'start', '4242');
    expect(missing.code).to.equal(1);
    expect(missing.stderr).to.match(/^hostctl: .*4242.*not found/);
    const peer = await ctl('vm', 'list', '--peer', 'no-such-member');
    expect(peer.code).to.equal(1);
    expect(peer.stderr).to.include('no-such-member');
    const noCommand = await ctl('lxc', 'exec', '200');
    expect(noCommand.code).to.equal(2);
    expect(noCommand.stderr).to.include('needs a command after the ID');
  });

  it('creates a token with every scope (--scopes all) and lists tokens as JSON, never a secret', async () => {
    const made = await ctl('token', 'create', '--name', 'everything', '--scopes', 'all');
    expect(made.code, made.stderr).to.equal(0);
    const secret = made.stdout.trim();
    const list = await ctl('token', 'list', '--json');
    expect(list.code, list.stderr).to.equal(0);
    const tokens = JSON.parse(list.stdout).tokens as Array<{ name: string; scopes: string[] }>;
    expect(tokens.find((t) => t.name === 'everything')!.scopes).to.deep.equal([...ALL_SCOPES].sort());
    expect(list.stdout).to.not.include(secret);
    await ctl('token', 'revoke', 'everything');
  });

  it('with --url and --token is a client of the API as that token, reaching what it reaches', async () => {
    const reader = await d.token('vm-reader', ['vm.read']);
    const listed = await remote(reader, 'vm', 'list', '--json');
    expect(listed.code, listed.stderr).to.equal(0);
    expect(JSON.parse(listed.stdout)).to.deep.equal({ vms: [] });
    const start = await remote(reader, 'vm', 'start', '101');
    expect(start.code).to.equal(1);
    expect(start.stderr).to.match(/^hostctl: token 'vm-reader' lacks scope 'vm\.manage' needed by vms_start$/m);
    const lxc = await remote(reader, 'lxc', 'list');
    expect(lxc.code).to.equal(1);
    expect(lxc.stderr).to.include("lacks scope 'lxc.read'");
    // Token management is the administrator's, over the local socket only.
    const tokens = await remote(reader, 'token', 'list');
    expect(tokens.code).to.equal(1);
    expect(tokens.stderr).to.match(/^hostctl: /);
    const bad = await remote('not-a-token', 'vm', 'list');
    expect(bad.code).to.equal(1);
    expect(bad.stderr).to.match(/^hostctl: .*token/i);
    // HOSTD_URL and HOSTD_TOKEN do the same.
    const env = await runCommand(process.execPath, [HOSTCTL, 'vm', 'list', '--json'], { env: { HOSTD_URL: d.url, HOSTD_TOKEN: reader } });
    expect(env.code, env.stderr).to.equal(0);
    expect(JSON.parse(env.stdout)).to.deep.equal({ vms: [] });
  });

  it('refuses a URL with a secret or a query in it, and one of the pair without the other', () => {
    expect(() => remoteOf('http://u:p@127.0.0.1:1', 't')).to.throw('--url takes no user, password, query or fragment');
    expect(() => remoteOf('http://127.0.0.1:1/?token=x', 't')).to.throw('--url takes no user');
    expect(() => remoteOf('ftp://127.0.0.1', 't')).to.throw('--url must be an http:// or https:// URL');
    expect(() => remoteOf('http://127.0.0.1:1', undefined)).to.throw('--url needs --token');
    expect(() => remoteOf(undefined, 't')).to.throw('--token needs --url');
    expect(remoteOf(undefined, undefined)).to.equal(undefined);
  });

  it('prints a bash completion with the commands and every operation name', async () => {
    const c = await ctl('completion', 'bash');
    expect(c.code, c.stderr).to.equal(0);
    expect(c.stdout).to.include('complete -F _hostctl hostctl');
    expect(c.stdout).to.include('vms_list');
    const words = /compgen -W "([^"]*)" -- "\$cur"\)\); return; fi/.exec(c.stdout)![1]!.split(' ');
    expect(words).to.include.members(['vm', 'lxc', 'apps', 'sandbox', 'token', 'call', 'events']);
  });
});
