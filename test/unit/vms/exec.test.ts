/**
 * Exec in a guest, the parts that do not need QEMU (the runtime tests in
 * test/runtime/vms/exec-output.test.ts hold the same through the real guest
 * agent): the guest-side wrapper run by this host's own /bin/sh, guestExec
 * over an agent that runs commands here the way qemu-ga does (whole output
 * collected, answered once the command ended), and the agent client's bound
 * on what a guest may send.
 */
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { boundedExecArgs, guestExec, killArgs, result, type AgentCall } from '../../../daemon/vms/qemu/exec.js';
import { AGENT_REPLY_MAX_BYTES, GuestAgent } from '../../../daemon/vms/qemu/agent.js';
import { EXEC_STREAM_CAP_BYTES } from '../../../daemon/lib/exec-output.js';
import { eventually } from '../../helpers/daemon.js';

const MiB = 1024 * 1024;

/** Runs guest-exec arguments with this host's /bin/sh. */
function runHere(a: { path: string; arg: string[] }, input?: string) {
  return spawnSync(a.path, a.arg, { input, maxBuffer: 64 * MiB });
}

/** Whether a process whose command line holds `marker` runs. */
function running(marker: string): boolean {
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(marker) && !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))) return true;
    } catch {
      /* gone */
    }
  }
  return false;
}

/** Whether a process runs with exactly this argument list. */
function runningExactly(argv: string[]): boolean {
  const want = argv.join('\0') + '\0';
  for (const pid of fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8') === want) return true;
    } catch {
      /* gone */
    }
  }
  return false;
}

/**
 * An agent that does what qemu-ga does with guest-exec and capture-output:
 * spawns the program, keeps all of its output, and reports it once the
 * process ended and both pipes closed. Counts the bytes it handed over.
 */
class LocalAgent {
  private readonly procs = new Map<number, { out: Buffer[]; err: Buffer[]; code: number | null; signal: string | null; done: boolean }>();
  handed = 0;

  call: AgentCall = async <T>(command: string, args?: Record<string, unknown>): Promise<T> => {
    if (command === 'guest-exec') {
      const a = args as { path: string; arg: string[]; 'input-data'?: string; 'capture-output'?: boolean };
      const c = spawn(a.path, a.arg, { stdio: ['pipe', a['capture-output'] ? 'pipe' : 'ignore', a['capture-output'] ? 'pipe' : 'ignore'] });
      const p = { out: [] as Buffer[], err: [] as Buffer[], code: null as number | null, signal: null as string | null, done: false };
      c.stdout?.on('data', (d) => p.out.push(d));
      c.stderr?.on('data', (d) => p.err.push(d));
      c.on('close', (code, signal) => Object.assign(p, { code, signal, done: true }));
      c.stdin!.end(a['input-data'] ? Buffer.from(a['input-data'], 'base64') : undefined);
      this.procs.set(c.pid!, p);
      return { pid: c.pid } as T;
    }
    if (command === 'guest-exec-status') {
      const p = this.procs.get((args as { pid: number }).pid)!;
      if (!p.done) return { exited: false } as T;
      const out = Buffer.concat(p.out);
      const err = Buffer.concat(p.err);
      this.handed += out.length + err.length;
      const s: Record<string, unknown> = { exited: true, 'out-data': out.toString('base64'), 'err-data': err.toString('base64') };
      if (p.code !== null) s.exitcode = p.code;
      else s.signal = os.constants.signals[p.signal as keyof typeof os.constants.signals];
      return s as T;
    }
    throw new Error(`unexpected agent command ${command}`);
  };
}

describe("vms exec: the guest-side wrapper (this host's /bin/sh)", () => {
  it('passes each stream up to cap + 1 bytes, drops the rest in the guest, and keeps the exit status', () => {
    const r = runHere(boundedExecArgs('head -c 5000000 /dev/zero; head -c 3000000 /dev/zero >&2; exit 7', MiB));
    expect(r.status).to.equal(7);
    expect(r.stdout.length).to.equal(MiB + 1);
    expect(r.stderr.length).to.equal(MiB + 1);
  });

  it('leaves small output, stdin and exit codes as they are', () => {
    const r = runHere(boundedExecArgs('echo out; echo err >&2; exit 3'));
    expect([r.status, r.stdout.toString(), r.stderr.toString()]).to.deep.equal([3, 'out\n', 'err\n']);
    const i = runHere(boundedExecArgs('cat; printf "[%s]" "$0"'), 'from stdin\n');
    expect([i.status, i.stdout.toString()]).to.deep.equal([0, 'from stdin\n[/bin/sh]']);
    // A command killed by a signal reports 128 + the signal, as a shell does.
    expect(runHere(boundedExecArgs('kill -TERM $$')).status).to.equal(128 + 15);
    // Quotes and expansions in the command reach its own shell unchanged, never the wrapper's.
    const q = runHere(boundedExecArgs(`x='a "b" $c'; printf '%s' "$x" '$2'`));
    expect(q.stdout.toString()).to.equal('a "b" $c$2');
  });

  it('runs the command in its own session, so that a kill of the group ends everything it started', async () => {
    const marker = `hostd-exec-unit-${crypto.randomBytes(4).toString('hex')}`;
    const a = boundedExecArgs(`sh -c 'sleep 300; : ${marker}' & sh -c 'while :; do echo ${marker}; done' ; wait`);
    const c = spawn(a.path, a.arg, { stdio: ['ignore', 'pipe', 'pipe'] });
    c.stdout.resume();
    c.stderr.resume();
    try {
      // The launcher becomes the session leader when it execs setsid: wait for that, not for a time.
      const session = () => fs.readFileSync(`/proc/${c.pid}/stat`, 'utf8').split(') ')[1].split(' ')[3];
      await eventually(
        () => session() === String(c.pid) && runningExactly(['sh', '-c', `sleep 300; : ${marker}`]),
        10_000,
        'the wrapper to lead its own session and the command to run',
      );
      expect(runHere(killArgs(c.pid!)).status).to.equal(0);
      await eventually(() => !running(marker), 10_000, 'every process of the command to end');
    } finally {
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  });
});

describe('vms exec: guestExec over an agent that collects the whole output', () => {
  it('answers at most the cap per stream with truncated, whatever the command printed', async () => {
    const a = new LocalAgent();
    const r = await guestExec(a.call, 'head -c 20000000 /dev/zero | tr "\\0" x; echo tail >&2; exit 4', 60_000);
    expect(r.exit_code).to.equal(4);
    expect(r.stdout.length).to.equal(EXEC_STREAM_CAP_BYTES);
    expect(r.stdout).to.match(/^x+$/);
    expect(r.stderr).to.equal('tail\n');
    expect([r.truncated, r.timed_out]).to.deep.equal([true, false]);
    expect(r.duration_ms).to.be.a('number');
    // What the agent handed over was cut in the "guest": cap + 1 bytes, not 20 MB.
    expect(a.handed).to.equal(EXEC_STREAM_CAP_BYTES + 1 + 5);
  });

  it('answers small output unchanged and not truncated, stdin included', async () => {
    const r = await guestExec(new LocalAgent().call, 'cat; echo err >&2; exit 2', 60_000, { input: 'in\n' });
    expect(r).to.deep.include({ exit_code: 2, stdout: 'in\n', stderr: 'err\n', truncated: false, timed_out: false });
    const exact = await guestExec(new LocalAgent().call, `head -c ${EXEC_STREAM_CAP_BYTES} /dev/zero`, 60_000);
    expect([exact.stdout.length, exact.truncated]).to.deep.equal([EXEC_STREAM_CAP_BYTES, false]);
  });

  it('kills the command at the timeout while it floods: timed_out, no exit code, what it printed until then', async () => {
    const marker = `hostd-exec-flood-${crypto.randomBytes(4).toString('hex')}`;
    const a = new LocalAgent();
    const r = await guestExec(a.call, `yes ${marker}`, 1500);
    expect(r).to.deep.include({ exit_code: null, timed_out: true });
    expect(r.stdout.length).to.be.at.most(EXEC_STREAM_CAP_BYTES);
    // Whole lines of the marker, the last perhaps cut by the cap.
    expect(
      r.stdout
        .split('\n')
        .slice(0, -1)
        .every((l) => l === marker),
    ).to.equal(true);
    await eventually(() => !running(marker), 10_000, 'the flooding command to end');
  });

  it('says truncated when the guest agent itself cut (a guest without head), and maps signals', () => {
    const r = result({ exited: true, exitcode: 0, 'out-data': Buffer.from('abc').toString('base64'), 'out-truncated': true }, 16, false, 1);
    expect(r).to.deep.include({ stdout: 'abc', truncated: true, exit_code: 0 });
    expect(result({ exited: true, signal: 9 }, 16, false, 1).exit_code).to.equal(137);
    // Even an agent that ignored the wrapper cannot make hostd keep more than the cap.
    const big = result({ exited: true, exitcode: 0, 'err-data': Buffer.alloc(40).toString('base64') }, 16, false, 1);
    expect([big.stderr.length, big.truncated]).to.deep.equal([16, true]);
  });
});

describe('vms exec: the guest agent client bounds what a guest may send', () => {
  let dir: string;
  let srv: net.Server;
  let sock: string;
  /** What the fake qemu-ga answers to each non-sync command: the reply line's length. */
  let replyBytes = 0;
  const conns: net.Socket[] = [];

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-qga-'));
    sock = path.join(dir, 'qga.sock');
    srv = net.createServer((c) => {
      conns.push(c);
      let buf = '';
      c.on('error', () => undefined);
      c.on('data', (d) => {
        buf += d.toString('latin1').replace(/\xff/g, '');
        let i: number;
        while ((i = buf.indexOf('\n')) >= 0) {
          const msg = JSON.parse(buf.slice(0, i));
          buf = buf.slice(i + 1);
          if (msg.execute === 'guest-sync-delimited')
            c.write(Buffer.concat([Buffer.from([0xff]), Buffer.from(JSON.stringify({ return: msg.arguments.id }) + '\n')]));
          else {
            // One JSON reply of the chosen size, sent in 64 KiB writes as a socket would deliver it.
            const pad = 'A'.repeat(Math.max(0, replyBytes - 16));
            const line = Buffer.from(JSON.stringify({ return: pad }) + '\n');
            for (let off = 0; off < line.length; off += 65536) c.write(line.subarray(off, off + 65536));
          }
        }
      });
    });
    await new Promise<void>((r) => srv.listen(sock, () => r()));
  });

  afterEach(async () => {
    for (const c of conns.splice(0)) c.destroy();
    await new Promise<void>((r) => srv.close(() => r()));
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads a reply within the bound (an exec reply of two cut streams fits)', async () => {
    const a = await GuestAgent.open(sock, 5000);
    try {
      replyBytes = Math.ceil((2 * (EXEC_STREAM_CAP_BYTES + 1) * 4) / 3) + 4096;
      const r = await a.call<string>('guest-exec-status', { pid: 1 }, 30_000);
      expect(r.length).to.be.greaterThan(2 * EXEC_STREAM_CAP_BYTES);
    } finally {
      a.close();
    }
  });

  it('closes the connection of a guest that sends more than the bound, instead of buffering it', async () => {
    const a = await GuestAgent.open(sock, 5000);
    try {
      replyBytes = AGENT_REPLY_MAX_BYTES + 1024 * 1024;
      let err: Error | null = null;
      try {
        await a.call('guest-exec-status', { pid: 1 }, 30_000);
      } catch (e) {
        err = e as Error;
      }
      expect(err?.name).to.equal('AgentError');
      expect(err?.message).to.equal(
        `guest agent reply: the guest agent sent more than ${AGENT_REPLY_MAX_BYTES} bytes without hostd reading them; the connection was closed`,
      );
      await eventually(() => conns[0].destroyed || conns[0].readableEnded, 10_000, 'the agent connection to close');
    } finally {
      a.close();
    }
  });
});
