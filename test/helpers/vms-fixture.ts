/**
 * What the VM runtime tests share: a daemon with two pools and a restricted
 * user network (guests reach nothing but the host's forwarded ports), a token,
 * JSON calls, task waits, and cleanup of every QEMU process a test's data dir
 * started (by pidfile, checked against the process's command line), also when
 * hostd itself was killed.
 */
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import crypto from 'node:crypto';
import { expect } from 'chai';
import { eventually, startDaemon, tempDir, type TestDaemon } from './daemon.js';
import { run, which } from '../../daemon/lib/run.js';
import { operations } from '../../api/registry/index.js';
import type { Operation } from '../../api/registry/types.js';
import { resultProblem } from '../../api/validate.js';
import { isPauseLine } from '../../daemon/lib/test-pause.js';
import { qemuDriver } from '../../daemon/vms/qemu/index.js';
import { requireRuntime, runtimeProblem } from './runtime-gate.js';

export const SCOPES = ['vm.read', 'vm.manage', 'vm.exec', 'sandbox.read', 'sandbox.manage', 'system.read'];

/** Why the VM runtime tests cannot run here, or null. */
/**
 * The runtime gate of the VM and sandbox suites: the VM domain's own driver
 * says which programs are there (as GET /vms/host-status does); the test
 * guest is built with debootstrap when it is not cached yet.
 */
export function requireVmsRuntime(ctx: Mocha.Context, domain: 'vms' | 'sandboxes' = 'vms'): Promise<void> {
  return requireRuntime(ctx, domain, qemuDriver({ diskRoots: [] }), { also: testGuestProblem });
}

const testGuestProblem = async (): Promise<string | null> =>
  (await which('debootstrap')) ? null : 'debootstrap is not installed (the test guest is built with it; deploy/install-deps.sh installs it)';

/** Why the VM runtime cannot run here, or null (for the benchmarks, which are not mocha suites). */
export function missingRuntime(): Promise<string | null> {
  return runtimeProblem(qemuDriver({ diskRoots: [] }), { also: testGuestProblem });
}

export interface VmsEnv {
  d: TestDaemon;
  token: string;
  root: string;
  pools: { p1: string; p2: string };
  extraYaml: string;
}

/**
 * The test config: two pools, small guests, and user networking restricted
 * (guests reach nothing but the host's forwards) unless `userNetRestrict` is
 * 'default', which leaves the host's default in place.
 */
export function configYaml(root: string, extra = '', userNetRestrict: true | 'default' = true, stopGraceSeconds = 90): string {
  return [
    'storage_pools:',
    `  - id: p1`,
    `    path: ${path.join(root, 'pool1')}`,
    `  - id: p2`,
    `    path: ${path.join(root, 'pool2')}`,
    'vms:',
    ...(userNetRestrict === 'default' ? [] : ['  user_net_restrict: true']),
    `  stop_grace_seconds: ${stopGraceSeconds}`,
    '  default_memory_mb: 512',
    '  default_disk_gb: 4',
    extra,
    '',
  ].join('\n');
}

/** A daemon for VM tests; `dataDir` reuses one (restart after a kill). */
export async function startVmsDaemon(
  opts: { root?: string; extraYaml?: string; env?: Record<string, string>; userNetRestrict?: true | 'default'; stopGraceSeconds?: number } = {},
): Promise<VmsEnv> {
  const root = opts.root ?? tempDir('hostd-vms-');
  const dataDir = path.join(root, 'data');
  fs.mkdirSync(path.join(root, 'pool1'), { recursive: true });
  fs.mkdirSync(path.join(root, 'pool2'), { recursive: true });
  const d = await startDaemon({
    dataDir,
    configYaml: configYaml(root, opts.extraYaml ?? '', opts.userNetRestrict ?? true, opts.stopGraceSeconds),
    env: opts.env,
  });
  const token = await d.token(`t-${crypto.randomBytes(3).toString('hex')}`, SCOPES);
  return { d, token, root, pools: { p1: path.join(root, 'pool1'), p2: path.join(root, 'pool2') }, extraYaml: opts.extraYaml ?? '' };
}

export async function api(e: VmsEnv, method: string, p: string, body?: unknown, token = e.token) {
  return e.d.request(method, `/api/v1${p}`, { token, body });
}

/** The registry operation a call of the VM, template or sandbox API reaches (a literal segment wins over a parameter). */
export function operationAt(method: string, p: string): Operation | undefined {
  const segs = p.split('?')[0].split('/').filter(Boolean);
  let best: { op: Operation; literal: number } | undefined;
  for (const op of operations) {
    if (op.method !== method || op.segments.length !== segs.length || !['vms', 'templates', 'sandboxes'].includes(op.domain)) continue;
    let literal = 0;
    const fits = op.segments.every((s, i) => (s.startsWith('{') ? true : s === segs[i] && ++literal > 0));
    if (fits && (!best || literal > best.literal)) best = { op, literal };
  }
  return best?.op;
}

/** The call succeeds with `status`; its body, which fits the operation's result schema. */
export async function ok(e: VmsEnv, method: string, p: string, body?: unknown, status = 200): Promise<any> {
  const r = await api(e, method, p, body);
  expect(r.status, `${method} ${p}: ${r.text}`).to.equal(status);
  const op = operationAt(method, p);
  if (op) expect(resultProblem(op, r.body), `${method} ${p}: the answer fits ${op.name}'s result schema`).to.equal(undefined);
  return r.body;
}

/** The call fails with exactly this status and error message. */
export async function fails(e: VmsEnv, method: string, p: string, body: unknown, status: number, error: string | RegExp): Promise<void> {
  const r = await api(e, method, p, body);
  expect(r.status, `${method} ${p}: ${r.text}`).to.equal(status);
  if (typeof error === 'string') expect(r.body).to.deep.equal({ error });
  else {
    expect(Object.keys(r.body)).to.deep.equal(['error']);
    expect(r.body.error).to.match(error);
  }
}

/** Waits for a task to end; its record. */
export async function settle(e: VmsEnv, taskId: string, ms = 600_000): Promise<any> {
  return eventually(
    async () => {
      const r = await api(e, 'GET', `/tasks/${taskId}`);
      const t = r.body?.task;
      return t && (t.state === 'succeeded' || t.state === 'failed') ? t : undefined;
    },
    ms,
    `task ${taskId}`,
  );
}

export async function succeeded(e: VmsEnv, taskId: string, ms?: number): Promise<any> {
  const t = await settle(e, taskId, ms);
  expect(t.state, `task ${taskId}: ${t.error}`).to.equal('succeeded');
  return t;
}

/** Waits until hostd logged that the VM domain paused at `step` (HOSTD_TEST_PAUSE_AT=vms.<step>). */
export async function pausedAt(e: VmsEnv, step: string, ms = 120_000): Promise<void> {
  await eventually(() => e.d.logs.some((l) => isPauseLine(l, `vms.${step}`)), ms, `hostd to pause at ${step}`);
}

/** QEMU processes started from this data dir (any hostd incarnation). */
export function qemuPids(root: string): number[] {
  return qemuGuests(root).map((g) => g.pid);
}

/** The live QEMU processes of this data dir with the VM each runs (`vm-<vmid>`, its run directory). */
export function qemuGuests(root: string): Array<{ vm: string; pid: number }> {
  const runDir = path.join(root, 'data', 'run');
  const out: Array<{ vm: string; pid: number }> = [];
  let names: string[] = [];
  try {
    names = fs.readdirSync(runDir);
  } catch {
    return out;
  }
  for (const n of names) {
    try {
      const pid = Number(fs.readFileSync(path.join(runDir, n, 'qemu.pid'), 'utf8').trim());
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (cmd.includes(`process=hostd-${n}`) && cmd.includes(runDir) && !/\) Z /.test(stat)) out.push({ vm: n, pid });
    } catch {
      /* gone */
    }
  }
  return out;
}

/**
 * Counts the data dir's QEMU processes over and over until stopped: the
 * most that ran at once (with which VMs) and when each VM's latest QEMU
 * process was first seen. A count, never a time limit: the poll only sets
 * how finely it looks.
 */
export function sampleGuests(root: string): { stop(): Promise<{ max: number; maxVms: string[]; firstSeen: Map<string, number> }> } {
  let stopped = false;
  let max = 0;
  let maxVms: string[] = [];
  // By VM, the latest QEMU process of it: a vmid freed by a deletion is given to the next VM made.
  const latest = new Map<string, { pid: number; at: number }>();
  const loop = (async () => {
    while (!stopped) {
      const g = qemuGuests(root);
      // Read after the look, so that a first sighting is never earlier than the QEMU it saw started.
      const now = Date.now();
      if (g.length > max) [max, maxVms] = [g.length, g.map((x) => x.vm).sort()];
      for (const x of g) if (latest.get(x.vm)?.pid !== x.pid) latest.set(x.vm, { pid: x.pid, at: now });
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return { max, maxVms, firstSeen: new Map([...latest].map(([vm, x]) => [vm, x.at])) };
    },
  };
}

/** Kills every QEMU of the test's data dir and waits for them to end. */
export async function killGuests(root: string): Promise<void> {
  for (const pid of qemuPids(root)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      /* gone */
    }
  }
  await eventually(() => qemuPids(root).length === 0, 20_000, 'test guests to end');
}

/**
 * Waits (bounded by `seconds`) until the VM's guest agent answers, in calls of
 * at most a minute each: one HTTP request held for the whole boot would meet
 * the client's own header timeout when a loaded machine boots slowly.
 */
export async function untilReady(e: VmsEnv, vmid: number, seconds: number): Promise<void> {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    const left = Math.ceil((end - Date.now()) / 1000);
    const w = await ok(e, 'POST', `/vms/${vmid}/wait-ready`, { timeout_seconds: Math.max(0, Math.min(60, left)) });
    if (w.ready) return;
    if (left <= 0) throw new Error(`VM ${vmid} was not ready within ${seconds} s: ${w.reason}`);
  }
}

/**
 * Runs `command` in the VM until it exits 0, each run bounded to a minute,
 * all of it by `seconds` (a wait inside the guest, such as `cloud-init status
 * --wait`, that may outlast one HTTP request on a loaded machine).
 */
export async function untilInGuest(e: VmsEnv, vmid: number, command: string, seconds: number): Promise<string> {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    const r = await ok(e, 'POST', `/vms/${vmid}/exec`, { command, timeout_seconds: 60 });
    if (r.exit_code === 0) return r.stdout;
    if (Date.now() > end)
      throw new Error(`'${command}' in VM ${vmid} did not succeed within ${seconds} s: ${r.timed_out ? 'timed out' : `exit ${r.exit_code}: ${r.stderr}`}`);
  }
}

/**
 * Waits for cloud-init's stages in a VM to end and asserts they ended `done`;
 * when not, the failure says why: cloud-init's own status, its look for the
 * NoCloud seed, and when the seed's CD-ROM appeared against when that look ran.
 */
export async function cloudInitDone(e: VmsEnv, vmid: number, seconds: number): Promise<void> {
  const status = await untilInGuest(e, vmid, 'cloud-init status --wait >/dev/null; cloud-init status --long; true', seconds);
  if (/^status: done$/m.test(status)) return;
  const why = await ok(e, 'POST', `/vms/${vmid}/exec`, {
    command:
      "grep -e 'Searching for' -e 'Attempting to use data' -e 'found local data' -e 'No local data' -e 'Cloud-init v' -e WARNING -e ERROR /var/log/cloud-init.log | tail -30; " +
      "journalctl -b -o short-monotonic --no-pager | grep -e 'Attached scsi CD-ROM' -e 'cloud-init' | head -20",
    timeout_seconds: 120,
  });
  expect.fail(`cloud-init in VM ${vmid} did not end done:\n${status}\n--- why\n${why.stdout}${why.stderr}`);
}

/** Runs a command in a VM and returns stdout, asserting exit 0. */
export async function sh(e: VmsEnv, vmid: number, command: string, timeout = 120): Promise<string> {
  const r = await ok(e, 'POST', `/vms/${vmid}/exec`, { command, timeout_seconds: timeout });
  expect(r.exit_code, `${command}: ${r.stderr}`).to.equal(0);
  return r.stdout;
}

/** A loopback HTTP server for catalog downloads: files by path, Range support. */
export class FileServer {
  private srv!: http.Server;
  port = 0;
  readonly files = new Map<string, string>();
  readonly requests: Array<{ path: string; range: string | undefined }> = [];

  async start(): Promise<void> {
    this.srv = http.createServer((req, res) => {
      const p = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
      this.requests.push({ path: p, range: req.headers.range });
      const file = this.files.get(p);
      if (!file) {
        res.writeHead(404).end();
        return;
      }
      const size = fs.statSync(file).size;
      let start = 0;
      const m = /^bytes=(\d+)-$/.exec(req.headers.range ?? '');
      if (m) {
        start = Number(m[1]);
        if (start >= size) {
          res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
          return;
        }
        res.writeHead(206, { 'content-length': size - start, 'content-range': `bytes ${start}-${size - 1}/${size}` });
      } else res.writeHead(200, { 'content-length': size });
      fs.createReadStream(file, { start }).pipe(res);
    });
    await new Promise<void>((r) => this.srv.listen(0, '127.0.0.1', () => r()));
    this.port = (this.srv.address() as { port: number }).port;
  }

  url(p: string): string {
    return `http://127.0.0.1:${this.port}${p}`;
  }

  async stop(): Promise<void> {
    this.srv.closeAllConnections();
    await new Promise<void>((r) => this.srv.close(() => r()));
  }
}

export async function sha256(file: string): Promise<string> {
  const r = await run('sha256sum', [file], { timeoutMs: 300_000 });
  return r.stdout.split(/\s+/)[0];
}

/** The cached sha256 of a (cached, immutable) file, computed once. */
export async function cachedSha256(file: string): Promise<string> {
  const side = `${file}.sha256`;
  if (fs.existsSync(side) && fs.statSync(side).mtimeMs >= fs.statSync(file).mtimeMs) return fs.readFileSync(side, 'utf8').trim();
  const h = await sha256(file);
  fs.writeFileSync(side, h + '\n');
  return h;
}
