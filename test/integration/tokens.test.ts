/**
 * Tokens end to end through the real CLI (issue 2, item 2): `hostctl token
 * create|list|revoke` over the admin socket of a real daemon, the secret used on
 * the HTTP API, and the store holding only its hash.
 */
import { expect } from 'chai';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Level } from 'level';
import { hostctl, runCommand, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { API, expectError, raw } from '../helpers/conformance.js';

/** The path the issue names (`npx hostctl` runs the same file through node_modules/.bin). */

function filesUnder(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...filesUnder(p));
    else if (e.isFile()) out.push(p);
  }
  return out;
}

describe('tokens through hostctl', function () {
  let d: TestDaemon;
  let dir: string;
  let secret: string;
  let secret2: string;
  const ctl = (...args: string[]) => hostctl(dir, args);

  before(async function () {
    this.timeout(60_000);
    dir = tempDir('hostd-tokens-');
    d = await startDaemon({ dataDir: dir });
  });

  it('token create prints the secret once, alone on one line of stdout, and it works on the API', async () => {
    const r = await ctl('token', 'create', '--name', 'ci-bot', '--scopes', 'vm.read,files.read,files.manage');
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stderr).to.equal('');
    const lines = r.stdout.split('\n');
    expect(lines, JSON.stringify(r.stdout)).to.have.length(2);
    expect(lines[1]).to.equal('');
    secret = lines[0];
    expect(secret).to.match(/^[A-Za-z0-9_.~-]{32,}$/);
    expect((await d.request('GET', `${API}/folders`, { token: secret })).status).to.equal(200);
    // vm.read lets it list VMs (503 only where this host has no QEMU).
    expect((await d.request('GET', `${API}/vms`, { token: secret })).status).to.be.oneOf([200, 503]);
    const mk = await d.request('POST', `${API}/folders`, { token: secret, body: { storage_id: 'default', name: 'made-by-ci-bot' } });
    expect(mk.status).to.equal(201);
    const no = await raw(d.url, 'GET', `${API}/system/health`, { token: secret });
    expectError(no, 403, "'system.read'", 'ci-bot');
  });

  it("`npx hostctl`, as the README has it, runs this checkout's hostctl (no download)", async () => {
    // npm reads options placed before the command as its own: the data dir goes by environment.
    const r = await runCommand('npx', ['--no', 'hostctl', 'token', 'create', '--name', 'via-npx', '--scopes', 'files.read'], {
      env: { HOSTD_DATA_DIR: d.dataDir },
    });
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.split('\n').filter(Boolean);
    expect(lines).to.have.length(1);
    expect(lines[0]).to.match(/^hostd_[A-Za-z0-9_-]{43}$/);
    expect((await d.request('GET', '/api/v1/folders', { token: lines[0] })).status).to.equal(200);
  });

  it('the activity row of a call names the token as actor; token creation is audited without the secret', async () => {
    const sys = await ctl('token', 'create', '--name', 'ci-audit', '--scopes', 'system.read');
    expect(sys.code).to.equal(0);
    secret2 = sys.stdout.trim();
    const rows = (await d.request('GET', `${API}/activity?limit=200`, { token: secret2 })).body.events as Array<Record<string, any>>;
    const made = rows.find((r) => r.metadata.operation === 'folders_create');
    expect(made?.actor).to.equal('ci-bot');
    const audit = rows.filter((r) => r.category === 'auth' && r.target === 'tokens/ci-bot');
    expect(audit).to.have.length(1);
    expect(JSON.stringify(rows)).to.not.contain(secret.replace(/^hostd_/, ''));
  });

  it('token list shows names, scopes, created and last used, and never a secret', async () => {
    const r = await ctl('token', 'list');
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).to.match(/^NAME\s+SCOPES\s+CREATED\s+LAST USED$/);
    const rows = new Map(
      lines.slice(1).map((l) => {
        const cols = l.split(/\s{2,}/);
        return [cols[0], cols];
      }),
    );
    expect([...rows.keys()]).to.include.members(['ci-bot', 'ci-audit']);
    const bot = rows.get('ci-bot')!;
    expect(bot[1]).to.equal('files.manage,files.read,vm.read');
    expect(Date.parse(bot[2])).to.be.closeTo(Date.now(), 120_000);
    expect(bot[3], 'last used after the API calls').to.not.equal('never');
    expect(Date.parse(bot[3])).to.be.at.least(Date.parse(bot[2]));
    for (const s of [secret, secret2]) {
      expect(r.stdout).to.not.contain(s);
      expect(r.stdout).to.not.contain(s.replace(/^hostd_/, ''));
      expect(r.stdout).to.not.contain(crypto.createHash('sha256').update(s).digest('hex'));
    }
    // Unused: 'never'.
    expect((await ctl('token', 'create', '--name', 'unused', '--scopes', 'vm.read')).code).to.equal(0);
    const again = await ctl('token', 'list');
    expect(again.stdout.split('\n').find((l) => l.startsWith('unused '))).to.match(/\snever$/);
  });

  it('a duplicate name is refused with a clear message and a non-zero exit; the first token keeps working', async () => {
    const r = await ctl('token', 'create', '--name', 'ci-bot', '--scopes', 'vm.read');
    expect(r.code).to.not.equal(0);
    expect(r.stdout).to.equal('');
    expect(r.stderr).to.contain("'ci-bot'").and.to.contain('already exists');
    expect((await d.request('GET', `${API}/folders`, { token: secret })).status).to.equal(200);
  });

  it('an unknown scope, a bad name or a missing --name is refused with a non-zero exit and nothing on stdout', async () => {
    const bad = await ctl('token', 'create', '--name', 'scoped', '--scopes', 'vm.read,vm.fly');
    expect(bad.code).to.not.equal(0);
    expect(bad.stdout).to.equal('');
    expect(bad.stderr).to.contain('vm.fly');
    for (const args of [
      ['--name', 'bad name!', '--scopes', 'vm.read'],
      ['--scopes', 'vm.read'],
      ['--name', '', '--scopes', 'vm.read'],
    ]) {
      const r = await ctl('token', 'create', ...args);
      expect(r.code, args.join(' ')).to.not.equal(0);
      expect(r.stdout, args.join(' ')).to.equal('');
      expect(r.stderr, args.join(' ')).to.match(/hostctl: .+/);
    }
    const list = await ctl('token', 'list');
    expect(list.stdout).to.not.match(/^scoped /m);
  });

  it('token revoke: the secret gets 401 at once; revoking again fails', async () => {
    const r = await ctl('token', 'revoke', 'ci-bot');
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.contain('ci-bot');
    expect(r.stdout).to.not.contain(secret);
    expectError(await raw(d.url, 'GET', `${API}/folders`, { token: secret }), 401);
    expect((await ctl('token', 'list')).stdout).to.not.match(/^ci-bot /m);
    const again = await ctl('token', 'revoke', 'ci-bot');
    expect(again.code).to.not.equal(0);
    expect(again.stderr).to.contain('ci-bot');
  });

  it('the admin socket is a socket of mode 0600 in the data dir', () => {
    const st = fs.statSync(path.join(dir, 'hostd.sock'));
    expect(st.isSocket()).to.equal(true);
    expect((st.mode & 0o777).toString(8)).to.equal('600');
  });

  it('hostctl without a daemon says it cannot reach it', async () => {
    const empty = tempDir('hostd-nodaemon-');
    const r = await hostctl(empty, ['token', 'list']);
    expect(r.code).to.not.equal(0);
    expect(r.stderr).to.contain('cannot reach hostd');
    expect(r.stderr).to.contain(empty);
  });

  it('the store holds only hashes: no secret in any LevelDB value or any file of the data dir; tokens survive a restart', async function () {
    this.timeout(60_000);
    await d.stop();
    const db = new Level<string, string>(path.join(dir, 'db'), { keyEncoding: 'utf8', valueEncoding: 'utf8' });
    await db.open();
    const entries = await db.iterator().all();
    await db.close();
    const tokenValues = entries.filter(([k]) => k.includes('tokens')).map(([, v]) => v);
    expect(tokenValues.length).to.be.at.least(2);
    const everything = entries.map(([k, v]) => `${k}\n${v}`).join('\n');
    for (const s of [secret, secret2]) {
      const core = s.replace(/^hostd_/, '');
      expect(everything.includes(core), 'secret in a LevelDB entry').to.equal(false);
      for (const f of filesUnder(dir)) {
        expect(fs.readFileSync(f).includes(Buffer.from(core)), `secret in ${f}`).to.equal(false);
      }
    }
    // The surviving token's hash is there (it is how a restarted daemon knows it).
    const h2 = crypto.createHash('sha256').update(secret2).digest('hex');
    expect(tokenValues.some((v) => v.includes(h2))).to.equal(true);

    const d2 = await startDaemon({ dataDir: dir });
    expect((await d2.request('GET', `${API}/system/health`, { token: secret2 })).status).to.equal(200);
    expectError(await raw(d2.url, 'GET', `${API}/folders`, { token: secret }), 401);
    const list = await ctl('token', 'list');
    expect(list.stdout).to.match(/^ci-audit /m);
    expect(list.stdout).to.not.match(/^ci-bot /m);
  });
});
