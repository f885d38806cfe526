/**
 * daemon/lib/run.ts: the one helper every domain runs host programs through.
 * Real programs (sh, cat, head, sleep), no stubs: argument arrays, the
 * timeout that kills and says so, cancellation, stdin input, stderr in the
 * error message, output caps, the 503 naming what to install, the
 * environment, and no program left running when the daemon exits.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { ProgramError, run, runBounded, stderrTail, which } from '../../daemon/lib/run.js';
import { rejectsApi } from '../helpers/expect.js';

const RUN_JS = fileURLToPath(new URL('../../daemon/lib/run.js', import.meta.url));

/** Waits until `cond` holds, polling; gives up after `limitMs` (a bound on a hang, not a speed check). */
async function until(cond: () => boolean, what = 'condition', limitMs = 20_000): Promise<void> {
  const end = Date.now() + limitMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`${what} did not come true within ${limitMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Whether a process is still running (a zombie waiting for its reaper counts as gone). */
function alive(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

async function caught(p: Promise<unknown>): Promise<ProgramError> {
  try {
    await p;
  } catch (err) {
    expect(err).to.be.instanceOf(ProgramError);
    return err as ProgramError;
  }
  throw new Error('expected a ProgramError');
}

describe('run (daemon/lib/run.ts)', () => {
  let dir: string;
  let n = 0;
  /** A fresh file path for a program to write its pid to. */
  const pidFile = () => path.join(dir, `pid-${++n}`);
  const readPid = (f: string) => Number(fs.readFileSync(f, 'utf8').trim());

  before(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-run-'));
  });
  after(() => {
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('passes arguments as an array, never through a shell', async () => {
    const r = await run('printf', ['%s|', 'a b', '$HOME', '`id`', "'q'"]);
    expect(r).to.deep.equal({ code: 0, stdout: "a b|$HOME|`id`|'q'|", stderr: '', stdoutBytes: undefined });
  });

  it('keeps the final newline and decodes UTF-8', async () => {
    expect((await run('printf', ['h\u00e9\n\n'])).stdout).to.equal('h\u00e9\n\n');
  });

  it('a failure is a ProgramError (500) with the exit code and the tail of stderr in the message', async () => {
    const e = await caught(run('sh', ['-c', 'echo out; echo "bad thing" >&2; exit 3']));
    expect(e.status).to.equal(500);
    expect(e.message).to.equal('sh -c failed (exit 3): bad thing');
    expect(e).to.include({ program: 'sh', code: 3, stderr: 'bad thing\n', stdout: 'out\n' });
  });

  it('names stdout when stderr is empty, and keeps only the last 600 characters of a long stderr', async () => {
    expect((await caught(run('sh', ['-c', 'echo "only on stdout"; exit 1']))).message).to.equal('sh -c failed (exit 1): only on stdout');
    const e = await caught(run('sh', ['-c', 'i=0; while [ $i -lt 300 ]; do i=$((i+1)); echo "line $i" >&2; done; exit 1']));
    expect(e.message).to.match(/^sh -c failed \(exit 1\): …/);
    expect(e.message.endsWith('line 299\nline 300')).to.equal(true);
    expect(e.message).to.not.include('line 1\n');
    expect(e.stderr.split('\n')).to.have.length(301);
    expect(stderrTail('x'.repeat(700))).to.equal('…' + 'x'.repeat(600));
  });

  it('okCodes makes an exit code a result', async () => {
    expect(await run('sh', ['-c', 'echo e >&2; exit 3'], { okCodes: [0, 3] })).to.include({ code: 3, stderr: 'e\n' });
    expect((await caught(run('false', []))).message).to.equal('false failed (exit 1)');
  });

  it('a missing program is 503 naming what to install', async () => {
    await rejectsApi(
      run('hostd-no-such-program', ['x'], { install: 'the hostd-test package' }),
      503,
      'hostd-no-such-program is not installed (install the hostd-test package)',
    );
    await rejectsApi(run('/nonexistent/bin/prog', []), 503, '/nonexistent/bin/prog is not installed');
    await rejectsApi(runBounded('hostd-no-such-program', [], { install: 'x' }), 503, 'hostd-no-such-program is not installed (install x)');
  });

  it('a program that cannot be executed is a 500, not a 503', async () => {
    const f = path.join(dir, 'not-executable');
    fs.writeFileSync(f, 'x', { mode: 0o644 });
    const e = await caught(run(f, ['a']));
    expect(e).to.include({ status: 500, code: -1 });
    expect(e.message).to.equal(`${f} a failed (exit -1)`);
  });

  it('an argument with a NUL byte is refused before anything runs', async () => {
    await rejectsApi(run('echo', ['a\0b']), 500, 'cannot run echo: Arguments cannot contain null bytes ("\\0"): a\0b');
  });

  it('input reaches the program on stdin: text and bytes, larger than a pipe holds', async () => {
    expect((await run('cat', [], { input: 's3cr\u00e9t\n' })).stdout).to.equal('s3cr\u00e9t\n');
    const bytes = Buffer.alloc(3 * 1024 * 1024);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7919) & 0xff;
    const r = await run('cat', [], { input: bytes, binary: true });
    expect(r.stdout).to.equal('');
    expect(Buffer.compare(r.stdoutBytes!, bytes)).to.equal(0);
  });

  it('input the program does not read is not a failure', async () => {
    expect(await run('true', [], { input: Buffer.alloc(4 * 1024 * 1024) })).to.include({ code: 0 });
  });

  it('reads a large stdout whole, and cuts each stream at maxBuffer', async () => {
    const big = await run('head', ['-c', String(10 * 1024 * 1024), '/dev/zero']);
    expect(big.stdout.length).to.equal(10 * 1024 * 1024);
    const cut = await run('sh', ['-c', 'head -c 100000 /dev/zero; head -c 100000 /dev/zero >&2; exit 0'], { maxBuffer: 1000 });
    expect(cut).to.include({ code: 0 });
    expect(cut.stdout.length).to.equal(1000);
    expect(cut.stderr.length).to.equal(1000);
  });

  it('waits for output from a child the program left running', async () => {
    expect((await run('sh', ['-c', '(sleep 0.2; echo late) & echo early'])).stdout).to.equal('early\nlate\n');
  });

  it('a timeout kills the program and says so, with stderr', async () => {
    const f = pidFile();
    const e = await caught(run('sh', ['-c', `echo $$ > ${f}; echo partial >&2; exec sleep 30`], { timeoutMs: 300 }));
    expect(e.message).to.equal('sh did not finish within 300 ms: partial');
    expect(e).to.include({ status: 500, code: null, stderr: 'partial\n' });
    expect(alive(readPid(f))).to.equal(false);
  });

  it('a program that ignores SIGTERM at the timeout is killed with SIGKILL', async () => {
    const f = pidFile();
    const e = await caught(run('sh', ['-c', `trap "" TERM; echo $$ > ${f}; exec sleep 30`], { timeoutMs: 200 }));
    expect(e.message).to.equal('sh did not finish within 200 ms');
    expect(alive(readPid(f))).to.equal(false);
  });

  it('timeoutMs 0 means no timeout', async () => {
    expect((await run('sh', ['-c', 'sleep 0.1; echo done'], { timeoutMs: 0 })).stdout).to.equal('done\n');
  });

  it('the abort signal kills the program: 409 cancelled', async () => {
    const f = pidFile();
    const ac = new AbortController();
    const p = run('sh', ['-c', `echo $$ > ${f}; exec sleep 30`], { signal: ac.signal });
    await until(() => fs.existsSync(f) && fs.readFileSync(f, 'utf8').endsWith('\n'));
    ac.abort();
    await rejectsApi(p, 409, 'sh was cancelled');
    expect(alive(readPid(f))).to.equal(false);
  });

  it('an already aborted signal runs nothing', async () => {
    const f = pidFile();
    const ac = new AbortController();
    ac.abort();
    await rejectsApi(run('sh', ['-c', `echo ran > ${f}`], { signal: ac.signal }), 409, 'sh was cancelled');
    expect(fs.existsSync(f)).to.equal(false);
  });

  it('a program killed by a signal says which, with stderr', async () => {
    const e = await caught(run('sh', ['-c', 'echo dying >&2; kill -9 $$']));
    expect(e.message).to.equal('sh was killed by SIGKILL: dying');
    expect(e.code).to.equal(null);
  });

  it('extends the environment, or replaces it with cleanEnv; undefined removes a variable', async () => {
    process.env.HOSTD_RUN_TEST = 'inherited';
    try {
      expect((await run('sh', ['-c', 'echo "$HOSTD_RUN_TEST|$FOO"'], { env: { FOO: 'bar' } })).stdout).to.equal('inherited|bar\n');
      expect((await run('sh', ['-c', 'echo "${HOSTD_RUN_TEST-unset}"'], { env: { HOSTD_RUN_TEST: undefined } })).stdout).to.equal('unset\n');
      const clean = await run('env', [], { env: { FOO: 'bar' }, cleanEnv: true });
      expect(clean.stdout).to.equal('FOO=bar\n');
    } finally {
      delete process.env.HOSTD_RUN_TEST;
    }
  });

  it('runs in cwd', async () => {
    expect((await run('pwd', [], { cwd: dir })).stdout).to.equal(`${fs.realpathSync(dir)}\n`);
  });

  it('runBounded: stdin is /dev/null, each stream capped and counted, exit code a result', async () => {
    const r = await runBounded('sh', ['-c', 'cat; head -c 5000 /dev/zero; echo e >&2; exit 4'], { cap: 100 });
    expect(r).to.include({ code: 4, signal: null, timedOut: false, canceled: false });
    expect(r.stdout.bytes().length).to.equal(100);
    expect(r.stdout).to.include({ seen: 5000, truncated: true });
    expect(r.stderr.text()).to.equal('e\n');
    expect((await runBounded('cat', [], { input: 'in' })).stdout.text()).to.equal('in');
  });

  it('runBounded: a timeout and a cancellation are results with the output so far', async () => {
    const t = await runBounded('sh', ['-c', 'echo o; exec sleep 30'], { timeoutMs: 300 });
    expect(t).to.include({ code: null, signal: 'SIGTERM', timedOut: true, canceled: false });
    expect(t.stdout.text()).to.equal('o\n');
    const f = pidFile();
    const ac = new AbortController();
    const p = runBounded('sh', ['-c', `echo $$ > ${f}; exec sleep 30`], { signal: ac.signal, timeoutMs: 0 });
    await until(() => fs.existsSync(f) && fs.readFileSync(f, 'utf8').endsWith('\n'));
    ac.abort();
    expect(await p).to.include({ code: null, signal: 'SIGTERM', timedOut: false, canceled: true });
  });

  it('which finds a program on the PATH or by its path, null when there is none', async () => {
    expect(await which('sh')).to.match(/\/sh$/);
    expect(await which('/bin/sh')).to.equal('/bin/sh');
    expect(await which('hostd-no-such-program')).to.equal(null);
  });

  it('a program still running when the daemon exits gets SIGTERM', async () => {
    const f = pidFile();
    const script = `import fs from 'node:fs';
      import { run } from ${JSON.stringify(RUN_JS)};
      run('sh', ['-c', 'echo $$ > ${f}; exec sleep 30'], { timeoutMs: 0 }).catch(() => {});
      setInterval(() => {
        try {
          if (fs.readFileSync(${JSON.stringify(f)}, 'utf8').endsWith('\\n')) process.exit(0);
        } catch {}
      }, 20);`;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore' });
    const code = await new Promise((r) => child.on('exit', r));
    expect(code).to.equal(0);
    const pid = readPid(f);
    try {
      await until(() => !alive(pid), `sleep (pid ${pid}) ended after the daemon exited`);
    } finally {
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });
});
