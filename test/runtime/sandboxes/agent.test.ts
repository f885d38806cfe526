/**
 * What an agent does inside its sandbox, against real QEMU (TCG here) and the
 * cached Debian test guest, through the real daemon with a token that holds
 * only sandbox scopes: exec (stdin, env, cwd, user, exit status, a timeout
 * that kills, a flood cut at the cap, base64), files (a 5 MiB round trip in
 * pieces, a listing, modes, a delete), 409 while suspended, and the operator's
 * `hostctl sandbox exec|files` on the same operations. The sandbox resumes
 * the shared daemon's warm state (test/helpers/sandboxes-fixture.ts): this
 * file is not about cold boots. One guest at a time; the after hook destroys
 * the file's sandboxes and revokes its tokens.
 */
import crypto from 'node:crypto';
import { expect } from 'chai';
import { requireVmsRuntime, type VmsEnv } from '../../helpers/vms-fixture.js';
import { HOSTCTL, runCommand } from '../../helpers/daemon.js';
import { call, failsAs, leaseSharedSandboxes, okAs, sbxSh, untilRunning, type SandboxLease } from '../../helpers/sandboxes-fixture.js';

const AGENT = ['sandbox.read', 'sandbox.manage'];
const PIECE = 512 * 1024;

describe('sandboxes runtime: exec and files (QEMU)', function () {
  this.timeout(30 * 60_000);
  let e: VmsEnv;
  let lease: SandboxLease | undefined;
  let alice = '';
  let bob = '';
  let id = '';

  before(async function () {
    await requireVmsRuntime(this, 'sandboxes');
    lease = await leaseSharedSandboxes({ alice: AGENT, bob: AGENT });
    ({ e } = lease);
    ({ alice, bob } = lease.tokens);
    const c = await ok(alice, 'POST', '/sandboxes', { image_id: 'deb12', name: 'agent-box' }, 201);
    id = c.sandbox.id;
    const sb = await untilRunning(e, alice, id, 600);
    expect(sb.start, 'resumed from the shared warm state').to.include({ method: 'warm', warm_state_id: lease.warmId });
  });

  after(async function () {
    await lease?.release();
  });

  const ok = (token: string, method: string, p: string, body?: unknown, status = 200) => okAs(e, token, method, p, body, status);
  const fails = (token: string, method: string, p: string, body: unknown, status: number, error: string | RegExp) =>
    failsAs(e, token, method, p, body, status, error);
  const exec = (body: Record<string, unknown>) => ok(alice, 'POST', `/sandboxes/${id}/exec`, body);
  const q = (args: Record<string, string | number | boolean>) => '?' + new URLSearchParams(Object.entries(args).map(([k, v]) => [k, String(v)])).toString();
  const files = (args: Record<string, string | number | boolean>) => `/sandboxes/${id}/files${q(args)}`;

  it('exec: runs /bin/sh -c with stdin, env, cwd and user, and answers the exit status', async () => {
    const a = await exec({ command: 'read x; echo "got $x"; echo to-err >&2; exit 3', stdin: 'hello\n' });
    expect(a).to.deep.include({ exit_code: 3, stdout: 'got hello\n', stderr: 'to-err\n', truncated: false, timed_out: false });
    expect(a.duration_ms).to.be.a('number');

    const b = await exec({ command: 'echo "$GREETING|$EMPTY|$(id -un)|$(pwd)|$HOME"', env: { GREETING: 'a b; $(touch /tmp/x) `c`', EMPTY: '' } });
    expect(b.stdout).to.equal('a b; $(touch /tmp/x) `c`||root|/root|/root\n');
    expect((await exec({ command: 'ls /tmp/x 2>&1 || echo absent' })).stdout).to.match(/absent\n$/);

    const c = await exec({ command: 'echo "$(id -un)|$(pwd)|$HOME|$PATH"', user: 'nobody', cwd: '/var/tmp', env: { PATH: '/usr/bin:/bin' } });
    expect(c).to.deep.include({ exit_code: 0, stdout: 'nobody|/var/tmp|/nonexistent|/usr/bin:/bin\n' });
    // The user's home, or / when it has none, is where a command starts without cwd.
    expect((await exec({ command: 'pwd', user: 'nobody' })).stdout).to.equal('/\n');

    expect(await exec({ command: 'true', user: 'nosuchuser' })).to.deep.include({
      exit_code: 126,
      stdout: '',
      stderr: "hostd: no user 'nosuchuser' in the guest\n",
    });

    // The activity row says what ran where, never the command, its input or its environment.
    const secret = `s3cret-${crypto.randomBytes(6).toString('hex')}`;
    await exec({ command: `: ${secret}-cmd; exit 5`, env: { API_KEY: secret }, stdin: `${secret}-in` });
    const rows = (await call(e, e.token, 'GET', '/activity?limit=200')).body.events.filter(
      (x: any) => x.target === `sandboxes/${id}` && /^Command run/.test(x.summary),
    );
    expect(rows.some((x: any) => x.summary === `Command run in sandbox ${id} 'agent-box' (exit 5)` && x.metadata.env_count === 1)).to.equal(true);
    expect(JSON.stringify(rows)).to.not.include(secret);
    expect(await exec({ command: 'true', cwd: '/no/such/dir' })).to.deep.include({
      exit_code: 126,
      stderr: "hostd: cannot change to directory '/no/such/dir'\n",
    });
  });

  it('exec: a timeout kills the command and its children and says so; a flood is cut at the cap', async () => {
    const mark = 3000 + crypto.randomInt(1000);
    const t = await exec({ command: `echo started; sh -c 'sleep ${mark}' & sleep ${mark}`, timeout_seconds: 2 });
    // The agent gives no output of a command it saw killed (stdout is empty here): what counts is that it ends.
    expect(t).to.deep.include({ exit_code: null, timed_out: true });
    const left = await exec({ command: `ps -eo args | grep -c '^sleep ${mark}$' || true` });
    expect(left.stdout.trim(), 'sleeps left after the timeout').to.equal('0');

    const f = await exec({ command: 'head -c 3000000 /dev/zero | tr "\\000" a; echo done >&2' });
    expect(f).to.deep.include({ exit_code: 0, truncated: true, stderr: 'done\n' });
    expect(f.stdout.length).to.equal(1024 * 1024);
  });

  it('exec: base64 carries any bytes in and out', async () => {
    const bytes = crypto.randomBytes(4096);
    const r = await exec({ command: 'cat; printf "\\377\\000" >&2', stdin: bytes.toString('base64'), encoding: 'base64' });
    expect(Buffer.from(r.stdout, 'base64').equals(bytes)).to.equal(true);
    expect(Buffer.from(r.stderr, 'base64')).to.deep.equal(Buffer.from([0xff, 0x00]));
    await fails(
      alice,
      'POST',
      `/sandboxes/${id}/exec`,
      { command: 'cat', stdin: 'not base64!', encoding: 'base64' },
      400,
      "argument 'stdin' must be base64 text",
    );
  });

  it('exec: bad arguments are 400 before the guest is asked', async () => {
    const p = `/sandboxes/${id}/exec`;
    await fails(alice, 'POST', p, { command: '' }, 400, "argument 'command' must not be empty");
    await fails(
      alice,
      'POST',
      p,
      { command: 'true', user: 'root;id' },
      400,
      "argument 'user' must be a Linux user name (1-32 of [a-z0-9_-], a letter or _ first)",
    );
    await fails(
      alice,
      'POST',
      p,
      { command: 'true', cwd: 'tmp' },
      400,
      "argument 'cwd' must be an absolute path in the guest (at most 4096 characters, no control characters)",
    );
    const envWords = "argument 'env' must be keyed by variable names (1-256 of [A-Za-z0-9_], not starting with a digit or HOSTD_EXEC_)";
    await fails(alice, 'POST', p, { command: 'true', env: { 'A=B': 'x' } }, 400, envWords);
    await fails(alice, 'POST', p, { command: 'true', env: { HOSTD_EXEC_USER: 'root' } }, 400, envWords);
    await fails(alice, 'POST', p, { command: 'true', timeout_seconds: 0 }, 400, "argument 'timeout_seconds' must be >= 1");
    await fails(alice, 'POST', p, { command: 'true', encoding: 'latin1' }, 400, "argument 'encoding' must be one of: utf8, base64");
  });

  it('files: a 5 MiB file goes in and comes back in pieces of 512 KiB, byte for byte', async () => {
    const data = crypto.randomBytes(5 * 1024 * 1024 + 123);
    for (let off = 0; off < data.length; off += PIECE) {
      const put = await ok(alice, 'PUT', `/sandboxes/${id}/files`, {
        path: '/srv/in/big.bin',
        content: data.subarray(off, off + PIECE).toString('base64'),
        append: off > 0,
      });
      expect(put).to.deep.include({ path: '/srv/in/big.bin', type: 'file', size: Math.min(data.length, off + PIECE), mode: '0644' });
    }
    const sum = crypto.createHash('sha256').update(data).digest('hex');
    expect((await sbxSh(e, id, 'sha256sum /srv/in/big.bin')).split(' ')[0]).to.equal(sum);
    const parts: Buffer[] = [];
    for (let off = 0; ; off += PIECE) {
      const g = await ok(alice, 'GET', files({ path: '/srv/in/big.bin', offset: off }));
      expect(g).to.deep.include({ type: 'file', size: data.length, offset: off, entries: null });
      parts.push(Buffer.from(g.content, 'base64'));
      if (g.eof) break;
    }
    expect(Buffer.concat(parts).equals(data)).to.equal(true);
    const tail = await ok(alice, 'GET', files({ path: '/srv/in/big.bin', offset: data.length - 10, length: 100 }));
    expect(Buffer.from(tail.content, 'base64').equals(data.subarray(data.length - 10))).to.equal(true);
    expect(tail.eof).to.equal(true);
  });

  it('files: modes, a listing, deletes, and 404 naming the file', async () => {
    await ok(alice, 'PUT', `/sandboxes/${id}/files`, { path: '/srv/d/secret', content: Buffer.from('s3').toString('base64'), mode: '0600' });
    await ok(alice, 'PUT', `/sandboxes/${id}/files`, { path: '/srv/d/sub/a b|c', content: '' });
    await sbxSh(e, id, 'ln -s /etc/hostname /srv/d/link');
    const g = await ok(alice, 'GET', files({ path: '/srv/d/secret' }));
    expect(g).to.deep.include({ type: 'file', size: 2, mode: '0600', content: Buffer.from('s3').toString('base64'), eof: true });
    expect(Date.parse(g.mtime)).to.be.greaterThan(Date.parse('2020-01-01'));
    // Rewriting keeps the mode; an explicit one changes it.
    expect((await ok(alice, 'PUT', `/sandboxes/${id}/files`, { path: '/srv/d/secret', content: Buffer.from('new').toString('base64') })).mode).to.equal('0600');
    const dir = await ok(alice, 'GET', files({ path: '/srv/d' }));
    expect(dir).to.deep.include({ type: 'directory', content: null, eof: null, truncated: false });
    expect(dir.entries.map((x: any) => [x.name, x.type])).to.deep.equal([
      ['link', 'symlink'],
      ['secret', 'file'],
      ['sub', 'directory'],
    ]);
    expect((await ok(alice, 'GET', files({ path: '/srv/d/sub' }))).entries.map((x: any) => x.name)).to.deep.equal(['a b|c']);

    await fails(
      alice,
      'PUT',
      `/sandboxes/${id}/files`,
      { path: '/srv/d', content: '' },
      409,
      `'/srv/d' is a directory in sandbox '${id}': only a file can be written`,
    );
    await fails(alice, 'GET', files({ path: '/dev/null' }), undefined, 409, `'/dev/null' in sandbox '${id}' is neither a regular file nor a directory`);
    await fails(
      alice,
      'DELETE',
      files({ path: '/srv/d' }),
      undefined,
      409,
      `directory '/srv/d' in sandbox '${id}' is not empty: delete it with recursive: true to remove its contents too`,
    );
    expect(await ok(alice, 'DELETE', files({ path: '/srv/d/secret' }))).to.deep.equal({ path: '/srv/d/secret', type: 'file' });
    await fails(alice, 'GET', files({ path: '/srv/d/secret' }), undefined, 404, `file '/srv/d/secret' not found in sandbox '${id}'`);
    await fails(alice, 'DELETE', files({ path: '/srv/d/secret' }), undefined, 404, `file '/srv/d/secret' not found in sandbox '${id}'`);
    expect(await ok(alice, 'DELETE', files({ path: '/srv/d/link' }))).to.deep.equal({ path: '/srv/d/link', type: 'symlink' });
    expect((await sbxSh(e, id, 'cat /etc/hostname')).trim()).to.equal('agent-box');
    expect(await ok(alice, 'DELETE', files({ path: '/srv/d', recursive: true }))).to.deep.equal({ path: '/srv/d', type: 'directory' });
    expect(await sbxSh(e, id, 'ls -A /srv | tr "\\n" " "')).to.equal('in ');
    await fails(alice, 'DELETE', files({ path: '/' }), undefined, 400, "argument 'path' must not be the root directory");
    await fails(
      alice,
      'GET',
      files({ path: 'etc/passwd' }),
      undefined,
      400,
      "argument 'path' must be an absolute path in the guest (at most 4096 characters, no control characters)",
    );
    await fails(alice, 'GET', files({ path: '/etc/passwd', length: PIECE + 1 }), undefined, 400, `argument 'length' must be <= ${PIECE}`);
  });

  it('another token gets 404 for exec and files; a suspended sandbox answers 409 naming its state', async () => {
    const nf = `sandbox '${id}' not found`;
    await fails(bob, 'POST', `/sandboxes/${id}/exec`, { command: 'id' }, 404, nf);
    await fails(bob, 'GET', files({ path: '/etc/hostname' }), undefined, 404, nf);
    await fails(bob, 'PUT', `/sandboxes/${id}/files`, { path: '/tmp/x', content: '' }, 404, nf);
    await fails(bob, 'DELETE', files({ path: '/tmp/x' }), undefined, 404, nf);
    await ok(alice, 'POST', `/sandboxes/${id}/suspend`, {});
    const busy = `sandbox '${id}' is suspended: exec needs a running sandbox (POST /sandboxes/${id}/resume)`;
    await fails(alice, 'POST', `/sandboxes/${id}/exec`, { command: 'id' }, 409, busy);
    await fails(
      alice,
      'GET',
      files({ path: '/etc/hostname' }),
      undefined,
      409,
      `sandbox '${id}' is suspended: reading a file needs a running sandbox (POST /sandboxes/${id}/resume)`,
    );
    await ok(alice, 'POST', `/sandboxes/${id}/resume`, {});
    await untilRunning(e, alice, id, 300);
    expect((await exec({ command: 'hostname' })).stdout).to.equal('agent-box\n');
  });

  it("hostctl sandbox exec and files (the operator) use the same operations on any token's sandbox", async () => {
    const hostctl = (...args: string[]) => runCommand(process.execPath, [HOSTCTL, '--data-dir', e.d.dataDir, 'sandbox', ...args]);
    const x = await hostctl('exec', id, '--env', 'V=1', '--cwd', '/tmp', '--', 'echo "$V $(pwd)"; exit 4');
    expect(x.code, x.stderr).to.equal(4);
    expect(x.stdout).to.equal('1 /tmp\n');
    const put = await hostctl('files', 'put', id, '/srv/op.txt', '--content', 'from the operator\n');
    expect(put.code, put.stderr).to.equal(0);
    const get = await hostctl('files', 'get', id, '/srv/op.txt');
    expect(get.code, get.stderr).to.equal(0);
    expect(get.stdout).to.equal('from the operator\n');
    const ls = await hostctl('files', 'ls', id, '/srv');
    expect(ls.code, ls.stderr).to.equal(0);
    expect(ls.stdout).to.match(/op\.txt/);
    const rm = await hostctl('files', 'rm', id, '/srv/op.txt');
    expect(rm.code, rm.stderr).to.equal(0);
    const gone = await hostctl('files', 'get', id, '/srv/op.txt');
    expect(gone.code).to.equal(1);
    expect(gone.stderr).to.equal(`hostctl: file '/srv/op.txt' not found in sandbox '${id}'\n`);
  });
});
