/**
 * The escalation suite, sandbox agent part (docs/security.md, "Sandboxes:
 * exec, files, fork"): what a token with sandbox scopes can reach through
 * exec, files and fork, against the real runtime. Another token gets 404 for
 * every one of them; a reader 403; arguments that would be commands are 400;
 * and a guest path only ever names a guest file: whatever the path says (a
 * host path, `..`, /proc/self/root, a symlink in the guest to a host file)
 * no host file is read or written. After every test the host is checked:
 * sentinels outside every root and in the VM domain's own directories unread
 * and unchanged, no file made by an injected command, no process carrying the
 * attempt's marker (the command, its environment) on the host's process list.
 *
 * A blank sandbox (its QEMU finds nothing to boot) serves the ownership
 * attempts; then one Debian guest, resumed from the shared daemon's warm
 * state (test/helpers/sandboxes-fixture.ts). Never two QEMU guests at once.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { HostGuard, rootProcessesWith } from '../../helpers/host-guard.js';
import { eventually } from '../../helpers/daemon.js';
import { attempts } from '../../helpers/escalation-calls.js';
import { qemuPids, requireVmsRuntime, type VmsEnv } from '../../helpers/vms-fixture.js';
import { call as apiCall, leaseSharedSandboxes, untilRunning, type SandboxLease } from '../../helpers/sandboxes-fixture.js';

const MARKER = `hostd-sbx-esc-${crypto.randomBytes(4).toString('hex')}`;
/** A file an injected command would make on the host. */
const PWNED = `/tmp/${MARKER}`;

describe('escalation: sandbox exec, files and fork against QEMU', function () {
  this.timeout(30 * 60_000);
  let e: VmsEnv;
  let lease: SandboxLease | undefined;
  const guard = new HostGuard();
  let tokens: Record<string, string> = {};
  let outside = '';
  let sentinel = '';

  const { answers, call, refused, ok } = attempts(
    () => e.d,
    () => tokens,
  );
  const q = (args: Record<string, string | boolean>) => '?' + new URLSearchParams(Object.entries(args).map(([k, v]) => [k, String(v)])).toString();
  const lacks = (who: string, op: string) => `token '${who}' lacks scope 'sandbox.manage' needed by ${op}`;

  before(async function () {
    await requireVmsRuntime(this, 'sandboxes');
    lease = await leaseSharedSandboxes({ sreader: ['sandbox.read'], sowner: ['sandbox.read', 'sandbox.manage'], sother: ['sandbox.read', 'sandbox.manage'] });
    ({ e, tokens } = lease);
    outside = path.join(e.root, 'outside');
    const planted = guard.plant(outside, path.join(e.pools.p1, '.vms'), path.join(e.d.dataDir, 'vms'));
    sentinel = planted[0].file;
    guard.snapshot();
  });

  afterEach(function () {
    if (!e) return;
    guard.assertIntact();
    for (const a of answers) guard.assertNotLeaked(a, 'an answer');
    expect(fs.existsSync(PWNED), `${PWNED} was made on the host`).to.equal(false);
    guard.assertNoRootProcess(MARKER);
  });

  after(async function () {
    guard.remove();
    fs.rmSync(PWNED, { force: true });
    await lease?.release();
  });

  it('another token gets 404 for exec, files and fork; a reader 403; the owner 409 while it boots', async () => {
    const made = await ok('sowner', 'POST', '/sandboxes', { image_id: 'blank', name: 'not-yours' }, 201);
    const id = made.sandbox.id;
    const nf = `sandbox '${id}' not found`;
    await refused('sother', 'POST', `/sandboxes/${id}/exec`, { command: `touch ${PWNED}` }, 404, nf);
    await refused('sother', 'GET', `/sandboxes/${id}/files${q({ path: '/etc/shadow' })}`, undefined, 404, nf);
    await refused(
      'sother',
      'PUT',
      `/sandboxes/${id}/files`,
      { path: '/root/.ssh/authorized_keys', content: Buffer.from('ssh-ed25519 AAAA x').toString('base64') },
      404,
      nf,
    );
    await refused('sother', 'DELETE', `/sandboxes/${id}/files${q({ path: '/etc', recursive: true })}`, undefined, 404, nf);
    await refused('sother', 'POST', `/sandboxes/${id}/fork`, { count: 1 }, 404, nf);
    // A made-up id and a path-like id are as unknown as another token's.
    await refused('sother', 'POST', '/sandboxes/sbx-000000000000/exec', { command: 'id' }, 404, "sandbox 'sbx-000000000000' not found");
    await refused('sreader', 'POST', `/sandboxes/${id}/exec`, { command: 'id' }, 403, lacks('sreader', 'sandboxes_exec'));
    await refused('sreader', 'GET', `/sandboxes/${id}/files${q({ path: '/etc/hostname' })}`, undefined, 403, lacks('sreader', 'sandboxes_files_get'));
    await refused('sreader', 'POST', `/sandboxes/${id}/fork`, {}, 403, lacks('sreader', 'sandboxes_fork'));
    const booting = `sandbox '${id}' is booting: exec needs a running sandbox (POST /sandboxes/${id}/wait)`;
    await refused('sowner', 'POST', `/sandboxes/${id}/exec`, { command: 'id' }, 409, booting);
    expect((await ok('sowner', 'DELETE', `/sandboxes/${id}`)).sandbox.state).to.equal('destroyed');
    await refused('sowner', 'POST', `/sandboxes/${id}/exec`, { command: 'id' }, 409, `sandbox '${id}' is destroyed`);
    await eventually(() => qemuPids(e.root).length === 0, 60_000, 'the blank sandbox QEMU to end');
  });

  it('arguments that would be commands or escapes are refused before any guest is asked (400)', async () => {
    const p = '/sandboxes/sbx-000000000000/exec';
    await refused(
      'sowner',
      'POST',
      p,
      { command: 'id', user: 'x$(reboot)' },
      400,
      "argument 'user' must be a Linux user name (1-32 of [a-z0-9_-], a letter or _ first)",
    );
    await refused('sowner', 'POST', p, { command: 'id', cwd: `../..${PWNED}` }, 400, /^argument 'cwd' must be an absolute path in the guest/);
    await refused('sowner', 'POST', p, { command: 'id', env: { [`X;touch ${PWNED}`]: '1' } }, 400, /^argument 'env' must be keyed by variable names/);
    await refused(
      'sowner',
      'POST',
      p,
      { command: 'id', env: { LD_PRELOAD: `a\u0000${MARKER}` } },
      400,
      "argument 'env.LD_PRELOAD' must be text without NUL characters",
    );
    await refused('sowner', 'POST', p, { command: 'x'.repeat(65537) }, 400, "argument 'command' must be at most 65536 characters");
    const f = '/sandboxes/sbx-000000000000/files';
    await refused('sowner', 'GET', `${f}${q({ path: `/tmp/a\n${MARKER}` })}`, undefined, 400, /^argument 'path' must be an absolute path in the guest/);
    await refused('sowner', 'PUT', f, { path: 'relative', content: '' }, 400, /^argument 'path' must be an absolute path in the guest/);
    await refused('sowner', 'PUT', f, { path: '/tmp/x', content: 'A'.repeat(699056) }, 400, "argument 'content' must be at most 699052 characters");
    await refused('sowner', 'DELETE', `${f}${q({ path: '//' })}`, undefined, 400, "argument 'path' must not be the root directory");
  });

  describe('in a running guest', () => {
    let id = '';
    before(async () => {
      const c = await ok('sowner', 'POST', '/sandboxes', { image_id: 'deb12', name: 'esc-guest' }, 201);
      id = c.sandbox.id;
      const sb = await untilRunning(e, tokens.sowner, id, 600);
      expect(sb.start, 'resumed from the shared warm state').to.include({ method: 'warm', warm_state_id: lease!.warmId });
    });

    const get = (p: string) => call('sowner', 'GET', `/sandboxes/${id}/files${q({ path: p })}`);
    const exec = (body: Record<string, unknown>) => ok('sowner', 'POST', `/sandboxes/${id}/exec`, body);

    it('a guest path never names a host file: host paths, .., /proc/self/root and guest symlinks to host files all stay in the guest', async () => {
      const notInGuest = (p: string) => `file '${p}' not found in sandbox '${id}'`;
      await refused('sowner', 'GET', `/sandboxes/${id}/files${q({ path: sentinel })}`, undefined, 404, notInGuest(sentinel));
      const traversal = `/../../..${sentinel}`;
      await refused('sowner', 'GET', `/sandboxes/${id}/files${q({ path: traversal })}`, undefined, 404, notInGuest(traversal));
      const viaProc = `/proc/self/root${sentinel}`;
      await refused('sowner', 'GET', `/sandboxes/${id}/files${q({ path: viaProc })}`, undefined, 404, notInGuest(viaProc));
      // A symlink in the guest to the sentinel's host path resolves in the guest (dangling there).
      await exec({ command: 'ln -sf "$T" /tmp/to-host', env: { T: sentinel } });
      await refused('sowner', 'GET', `/sandboxes/${id}/files${q({ path: '/tmp/to-host' })}`, undefined, 404, notInGuest('/tmp/to-host'));
      // /etc/hostname through a symlink is the guest's, not the host's.
      await exec({ command: 'ln -sf /etc/hostname /tmp/to-hostname' });
      const h = await get('/tmp/to-hostname');
      expect(h.status, h.text).to.equal(200);
      expect(Buffer.from(h.body.content, 'base64').toString()).to.equal('esc-guest\n');
      expect(fs.readFileSync('/etc/hostname', 'utf8')).to.not.equal('esc-guest\n');

      // Writes: to the sentinel's host path, its directory, and through a guest symlink to it.
      const bytes = Buffer.from(`${MARKER}\n`).toString('base64');
      await ok('sowner', 'PUT', `/sandboxes/${id}/files`, { path: sentinel, content: bytes });
      await ok('sowner', 'PUT', `/sandboxes/${id}/files`, { path: PWNED, content: bytes });
      // The symlink now leads to the guest's file of the sentinel's name: rewritten there.
      await ok('sowner', 'PUT', `/sandboxes/${id}/files`, { path: '/tmp/to-host', content: bytes });
      expect(fs.existsSync(PWNED), 'a host file written').to.equal(false);
      expect(fs.readdirSync(outside).length, 'a file added next to the sentinel').to.equal(1);
      // ... each went to the guest's own file of that name.
      const inGuest = await exec({ command: 'cat "$S" "$P"; readlink -f /tmp/to-host', env: { S: sentinel, P: PWNED } });
      expect(inGuest.stdout).to.equal(`${MARKER}\n${MARKER}\n${sentinel}\n`);
      // Deletes: the guest's copies go, the host's sentinel stays (afterEach checks it).
      await ok('sowner', 'DELETE', `/sandboxes/${id}/files${q({ path: sentinel })}`);
      await ok('sowner', 'DELETE', `/sandboxes/${id}/files${q({ path: path.dirname(sentinel), recursive: true })}`);
      await refused('sowner', 'DELETE', `/sandboxes/${id}/files${q({ path: sentinel })}`, undefined, 404, notInGuest(sentinel));
    });

    it('exec runs in the guest only: shell text in the command, env, cwd and stdin never reaches a host shell or the host process list', async () => {
      // The command and its environment carry the marker while the command runs: the host process list must not show it.
      const running = exec({ command: `: ${MARKER}; touch "$TARGET"; sleep 8`, env: { TARGET: PWNED, SECRET_TOKEN: MARKER }, timeout_seconds: 60 });
      let seen = false;
      await eventually(
        async () => {
          const r = await apiCall(e, tokens.sowner, 'POST', `/sandboxes/${id}/exec`, { command: `ls ${PWNED} 2>/dev/null || true` });
          seen = seen || rootProcessesWith(MARKER).length > 0;
          return r.body.stdout === `${PWNED}\n`;
        },
        120_000,
        'the command to run in the guest',
      );
      expect(rootProcessesWith(MARKER), 'host processes carrying the marker while it runs').to.deep.equal([]);
      expect(seen).to.equal(false);
      const r = await running;
      expect(r.exit_code).to.equal(0);
      const inj = await exec({ command: 'cat; echo "$V"', stdin: `$(touch ${PWNED}.in)`, env: { V: `$(touch ${PWNED}.env)` }, cwd: '/tmp' });
      expect(inj.stdout).to.equal(`$(touch ${PWNED}.in)$(touch ${PWNED}.env)\n`);
      const cwd = await exec({ command: 'true', cwd: `/tmp/$(touch ${PWNED}.cwd)` });
      expect(cwd.exit_code).to.equal(126);
      const made = await exec({ command: `ls ${PWNED}.in ${PWNED}.env ${PWNED}.cwd 2>&1 | grep -c 'No such' || true` });
      expect(made.stdout.trim(), 'files made in the guest by injected text').to.equal('3');
      for (const suffix of ['.in', '.env', '.cwd']) expect(fs.existsSync(PWNED + suffix)).to.equal(false);
    });
  });
});
