/**
 * The sandbox agent operations without a guest: their argument rules (400
 * before any guest is asked), the guest-side scripts run by this host's
 * /bin/sh on a temporary directory (a guest runs the same text), and the
 * parsing of their answers. The real guest is test/runtime/sandboxes/agent.test.ts.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { getOperation } from '../../../api/registry/index.js';
import { validateArgs } from '../../../api/validate.js';
import { ApiError } from '../../../daemon/lib/errors.js';
import { run } from '../../../daemon/lib/run.js';
import { EXEC_PRELUDE, preludeEnv } from '../../../daemon/vms/qemu/exec.js';
import { LIST_SCRIPT, parseListing, parseStat, PREPARE_PUT_SCRIPT, REMOVE_SCRIPT, STAT_SCRIPT } from '../../../daemon/vms/qemu/files.js';

const problem = (op: string, args: Record<string, unknown>): [number, string] | null => {
  try {
    validateArgs(getOperation(op)!, args);
    return null;
  } catch (err) {
    if (err instanceof ApiError) return [err.status, err.message];
    throw err;
  }
};

/** A fixed script with positional parameters, as the guest agent runs it (`/bin/sh -c script hostd-exec args...`). */
const ANY_EXIT = Array.from({ length: 256 }, (_, i) => i);
const sh = (script: string, args: string[]) => run('/bin/sh', ['-c', script, 'hostd-exec', ...args], { timeoutMs: 30_000, okCodes: ANY_EXIT });

describe('sandboxes agent operations: arguments and guest scripts', () => {
  let dir = '';
  beforeEach(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sbx-agent-'));
  });
  afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

  it('checks exec arguments: env names and values, cwd, user, sizes, encoding (400 naming the argument)', () => {
    const ex = (a: Record<string, unknown>) => problem('sandboxes_exec', { id: 'sbx-000000000000', command: 'true', ...a });
    expect(ex({})).to.equal(null);
    expect(ex({ env: { GOOD_1: 'x', _a: '' }, cwd: '/tmp/a b', user: 'www-data', encoding: 'base64', timeout_seconds: 86400 })).to.equal(null);
    expect(ex({ command: '' })).to.deep.equal([400, "argument 'command' must not be empty"]);
    expect(ex({ command: 'x'.repeat(65537) })).to.deep.equal([400, "argument 'command' must be at most 65536 characters"]);
    const envWords = "argument 'env' must be keyed by variable names (1-256 of [A-Za-z0-9_], not starting with a digit or HOSTD_EXEC_)";
    for (const name of ['A=B', '1A', 'HOSTD_EXEC_COMMAND', 'A B', '']) expect(ex({ env: { [name]: 'x' } }), name).to.deep.equal([400, envWords]);
    expect(ex({ env: { A: 'a\u0000b' } })).to.deep.equal([400, "argument 'env.A' must be text without NUL characters"]);
    expect(ex({ env: { A: 'x'.repeat(32769) } })?.[0]).to.equal(400);
    expect(ex({ env: Object.fromEntries(Array.from({ length: 129 }, (_, i) => [`V${i}`, ''])) })?.[0]).to.equal(400);
    const pathWords = "argument 'cwd' must be an absolute path in the guest (at most 4096 characters, no control characters)";
    expect(ex({ cwd: 'relative' })).to.deep.equal([400, pathWords]);
    expect(ex({ cwd: '/a\nb' })).to.deep.equal([400, pathWords]);
    const userWords = "argument 'user' must be a Linux user name (1-32 of [a-z0-9_-], a letter or _ first)";
    for (const u of ['root;id', 'Root', '-x', '$(id)', '']) expect(ex({ user: u }), u).to.deep.equal([400, userWords]);
    expect(ex({ timeout_seconds: 0 })).to.deep.equal([400, "argument 'timeout_seconds' must be >= 1"]);
    expect(ex({ encoding: 'latin1' })).to.deep.equal([400, "argument 'encoding' must be one of: utf8, base64"]);
  });

  it('checks file arguments: guest paths, base64 content within 512 KiB, modes, lengths', () => {
    const id = 'sbx-000000000000';
    expect(problem('sandboxes_files_put', { id, path: '/etc/x', content: 'aGk=', mode: '0755', append: true })).to.equal(null);
    expect(problem('sandboxes_files_put', { id, path: '/etc/x', content: 'not base64!' })?.[1]).to.equal(
      "argument 'content' must be base64 text of at most 524288 bytes",
    );
    expect(problem('sandboxes_files_put', { id, path: '/etc/x', content: 'A'.repeat(699052) })).to.equal(null);
    expect(problem('sandboxes_files_put', { id, path: '/etc/x', content: 'A'.repeat(699056) })?.[0]).to.equal(400);
    expect(problem('sandboxes_files_put', { id, path: '/etc/x', content: '', mode: '999' })).to.deep.equal([
      400,
      "argument 'mode' must be octal permission bits such as '0644'",
    ]);
    expect(problem('sandboxes_files_get', { id, path: '/x', length: 512 * 1024 })).to.equal(null);
    expect(problem('sandboxes_files_get', { id, path: '/x', length: 512 * 1024 + 1 })).to.deep.equal([400, "argument 'length' must be <= 524288"]);
    expect(problem('sandboxes_files_delete', { id, path: 'x' })?.[0]).to.equal(400);
    expect(problem('sandboxes_files_delete', { id, path: '/' + 'a'.repeat(4096) })?.[0]).to.equal(400);
  });

  it('the exec prelude takes everything from the environment: the command text is never spliced into a script', async () => {
    const env = preludeEnv('echo "$X|$(pwd)"; exit 7', { env: { X: "'; touch pwned; '", PATH: '/usr/bin:/bin' }, cwd: dir });
    expect(env).to.include('HOSTD_EXEC_PATH=/usr/bin:/bin');
    expect(env[0]).to.match(/^PATH=/);
    const r = await run('/bin/sh', ['-c', EXEC_PRELUDE], {
      // qemu-ga's `env` replaces the environment, as cleanEnv does.
      env: Object.fromEntries(env.map((x) => [x.slice(0, x.indexOf('=')), x.slice(x.indexOf('=') + 1)])),
      cleanEnv: true,
      timeoutMs: 30_000,
      okCodes: ANY_EXIT,
    });
    expect(r.code).to.equal(7);
    expect(r.stdout).to.equal(`'; touch pwned; '|${dir}\n`);
    expect(fs.existsSync(path.join(dir, 'pwned'))).to.equal(false);
    expect(EXEC_PRELUDE).to.not.include('echo "$X');
  });

  it('the file scripts stat, list, prepare and remove by a path given as a parameter', async () => {
    const odd = path.join(dir, "it's $(touch pwned) a|b");
    const put = await sh(PREPARE_PUT_SCRIPT, [path.join(odd, 'new.txt'), '']);
    expect(put.code, put.stderr).to.equal(0);
    expect((fs.statSync(path.join(odd, 'new.txt')).mode & 0o777).toString(8)).to.equal('644');
    fs.writeFileSync(path.join(odd, 'new.txt'), 'hello');
    const st = await sh(STAT_SCRIPT, [path.join(odd, 'new.txt')]);
    expect(parseStat(st.stdout)).to.deep.include({ type: 'file', size: 5, mode: '0644' });
    expect((await sh(STAT_SCRIPT, [path.join(dir, 'missing')])).code).to.equal(44);
    expect((await sh(PREPARE_PUT_SCRIPT, [odd, ''])).code, 'a directory is not written').to.equal(45);
    expect((await sh(PREPARE_PUT_SCRIPT, ['/dev/null', ''])).code, 'nor a device').to.equal(46);
    fs.writeFileSync(path.join(dir, 'plain'), '');
    expect((await sh(PREPARE_PUT_SCRIPT, [path.join(dir, 'plain', 'below'), ''])).code, 'a parent that is a file').to.equal(47);
    fs.symlinkSync('/etc/hostname', path.join(odd, 'link'));
    const ls = await sh(LIST_SCRIPT, [odd, '1048577']);
    expect(ls.code, ls.stderr).to.equal(0);
    expect(parseListing(ls.stdout).map((x) => [x.name, x.type])).to.deep.equal([
      ['link', 'symlink'],
      ['new.txt', 'file'],
    ]);
    expect((await sh(LIST_SCRIPT, [odd, '10'])).stdout.length, 'the listing is cut in the guest').to.equal(10);
    expect((await sh(REMOVE_SCRIPT, [odd, '0'])).code, 'a full directory needs recursive').to.equal(50);
    expect((await sh(REMOVE_SCRIPT, [path.join(odd, 'link'), '0'])).stdout).to.equal('symlink\n');
    expect(fs.existsSync('/etc/hostname')).to.equal(true);
    expect((await sh(REMOVE_SCRIPT, [odd, '1'])).stdout).to.equal('directory\n');
    expect((await sh(REMOVE_SCRIPT, [odd, '1'])).code).to.equal(44);
    expect(fs.readdirSync(dir)).to.deep.equal(['plain']);
  });

  it('parses a listing whose last record the cap cut short (dropped, not half-read)', () => {
    const out = 'f|5|644|1700000000.5|a\0d|4096|755|1700000001.0|b|c\0f|1|6';
    expect(parseListing(out)).to.deep.equal([
      { name: 'a', type: 'file', size: 5, mode: '0644', mtime: new Date(1700000000500).toISOString() },
      { name: 'b|c', type: 'directory', size: 4096, mode: '0755', mtime: new Date(1700000001000).toISOString() },
    ]);
  });
});
