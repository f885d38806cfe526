/**
 * What the sandbox runtime tests and the bench share: a VM test daemon
 * (test/helpers/vms-fixture.ts) with a `sandboxes:` section, the cached test
 * guest imported as an image, a blank image that never boots (for rules that
 * need a sandbox but not a guest), exec through the admin socket, waits.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { eventually, runCommand, shareDaemon, HOSTCTL } from './daemon.js';
import { run } from '../../daemon/lib/run.js';
import { guestImage } from './vms-guest.js';
import { api, operationAt, qemuPids, settle, startVmsDaemon, succeeded, type VmsEnv } from './vms-fixture.js';
import { resultProblem } from '../../api/validate.js';

export const SANDBOX_YAML = (extra = '') => ['sandboxes:', '  default_memory_mb: 512', '  warm_scan_seconds: 0', extra].filter(Boolean).join('\n');

export async function startSandboxDaemon(opts: { root?: string; sandboxes?: string; env?: Record<string, string> } = {}): Promise<VmsEnv> {
  return startVmsDaemon({ root: opts.root, extraYaml: SANDBOX_YAML(opts.sandboxes ?? ''), env: opts.env });
}

/**
 * Imports the cached test guest as `id` (and a blank disk as `blank`, which
 * boots nothing). The lean guest (no cloud-init: test/helpers/vms-guest.ts)
 * unless a test is about what cloud-init does in the guest.
 */
export async function importImages(e: VmsEnv, id = 'deb12', blank = true, kind: 'full' | 'lean' = 'lean'): Promise<void> {
  const image = await guestImage(kind);
  const imp = await e.d.admin.request('POST', '/admin/vms/images/import', { file: image, image_id: id, default_user: 'debian' });
  expect(imp.status, JSON.stringify(imp.body)).to.equal(201);
  await succeeded(e, imp.body.task.task_id);
  if (!blank) return;
  await importBlank(e);
}

export async function importBlank(e: VmsEnv): Promise<void> {
  const file = path.join(e.root, 'blank.qcow2');
  if (!fs.existsSync(file)) await run('qemu-img', ['create', '-q', '-f', 'qcow2', file, '1G'], { timeoutMs: 30_000 });
  const imp = await e.d.admin.request('POST', '/admin/vms/images/import', { file, image_id: 'blank' });
  expect(imp.status, JSON.stringify(imp.body)).to.equal(201);
  await succeeded(e, imp.body.task.task_id);
}

/** Starts `hostctl sandbox warm IMAGE --no-wait` as an operator would; the task id. */
export async function startWarm(e: VmsEnv, image = 'deb12'): Promise<string> {
  const r = await runCommand(process.execPath, [HOSTCTL, '--data-dir', e.d.dataDir, 'sandbox', 'warm', image, '--no-wait']);
  expect(r.code, r.stderr).to.equal(0);
  const id = r.stdout.trim();
  expect(id).to.match(/^task_[0-9a-f]+$/);
  return id;
}

export async function warmDone(e: VmsEnv, taskId: string): Promise<string> {
  const t = await settle(e, taskId, 900_000);
  expect(t.state, `warm task: ${t.error}`).to.equal('succeeded');
  return t.result.warm_state_id;
}

/** A call as `token`; the reply. */
export function call(e: VmsEnv, token: string, method: string, p: string, body?: unknown) {
  return api(e, method, p, body, token);
}

/** The call as `token` succeeds with `status`; its body, which fits the result schema of the operation it reached (one must). */
export async function okAs(e: VmsEnv, token: string, method: string, p: string, body?: unknown, status = 200): Promise<any> {
  const r = await call(e, token, method, p, body);
  expect(r.status, `${method} ${p}: ${r.text}`).to.equal(status);
  const op = operationAt(method, p);
  expect(op, `an operation at ${method} ${p}`).to.not.equal(undefined);
  expect(resultProblem(op!, r.body), `${method} ${p}: the answer fits ${op!.name}'s result schema`).to.equal(undefined);
  return r.body;
}

/** The call as `token` fails with this status and a body of exactly this error message. */
export async function failsAs(e: VmsEnv, token: string, method: string, p: string, body: unknown, status: number, error: string | RegExp): Promise<void> {
  const r = await call(e, token, method, p, body);
  expect(r.status, `${method} ${p}: ${r.text}`).to.equal(status);
  expect(Object.keys(r.body ?? {}), r.text).to.deep.equal(['error']);
  if (typeof error === 'string') expect(r.body.error).to.equal(error);
  else expect(r.body.error).to.match(error);
}

/** A command in a sandbox through the admin socket (hostctl sandbox exec); stdout, exit 0 asserted. */
export async function sbxSh(e: VmsEnv, id: string, command: string, timeout = 60): Promise<string> {
  const r = await e.d.admin.request('POST', '/admin/sandboxes/exec', { id, command, timeout_seconds: timeout });
  expect(r.status, JSON.stringify(r.body)).to.equal(200);
  expect(r.body.exit_code, `${command}: ${r.body.stderr}`).to.equal(0);
  return r.body.stdout;
}

/**
 * Waits (bounded by `seconds`) until the sandbox runs; its record. Each wait
 * call holds at most a minute: one request held for a whole cold boot would
 * meet the client's header timeout on a loaded machine.
 */
export async function untilRunning(e: VmsEnv, token: string, id: string, seconds = 600): Promise<any> {
  const end = Date.now() + seconds * 1000;
  for (;;) {
    const left = Math.ceil((end - Date.now()) / 1000);
    const r = await call(e, token, 'POST', `/sandboxes/${id}/wait`, { timeout_seconds: Math.max(0, Math.min(60, left)) });
    expect(r.status, r.text).to.equal(200);
    if (r.body.running || !r.body.timed_out || left <= 0) {
      expect(r.body.running, `sandbox ${id}: ${r.body.reason}`).to.equal(true);
      return r.body.sandbox;
    }
  }
}

/** The VM directories in the pools (what disks exist). */
export function vmDirs(e: VmsEnv): string[] {
  const out: string[] = [];
  for (const p of [e.pools.p1, e.pools.p2]) {
    const d = path.join(p, '.vms');
    if (!fs.existsSync(d)) continue;
    for (const n of fs.readdirSync(d)) if (n.startsWith('vm-')) out.push(n);
  }
  return out.sort();
}

/** VM directories match the live sandboxes' VMs exactly, and `running` QEMU processes run (no orphan, none missing). */
export async function onlyTheseVms(e: VmsEnv, vmids: number[], running = vmids.length): Promise<void> {
  const want = [...vmids].sort((a, b) => a - b);
  await eventually(
    () =>
      vmDirs(e).join() ===
      want
        .map((v) => `vm-${v}`)
        .sort()
        .join(),
    20_000,
    `VM dirs ${want.join(',')} (have ${vmDirs(e).join(',')})`,
  );
  expect(qemuPids(e.root).length, 'QEMU processes').to.equal(running);
}

/**
 * One sandbox daemon shared by the sandbox files of a mocha process that are
 * not about cold boots or about making warm states (agent, fork, the
 * escalation suite): the test guest and a blank disk imported, and one warm
 * state of the guest saved, once, when the first of those files asks. Each
 * later sandbox resumes that state in seconds instead of a cold boot (a
 * minute or more under TCG). The daemon outlives the file that started it
 * (the root hooks stop it at the end of the run); each file gets its own
 * tokens and, when it ends, has its sandboxes destroyed and its tokens
 * revoked, so that the next file starts from the same state. No guest runs
 * between files.
 */
export interface SharedSandboxes {
  e: VmsEnv;
  /** The warm state of image deb12 every sandbox of these files resumes. */
  warmId: string;
}

/** The cap the fork file's refusals name (three live sandboxes a token). */
export const SHARED_CAPS = '  max_per_token: 3';
/** One fork copy resuming at a time whatever the host's cores (the fork file counts the guests). */
export const SHARED_FORK_RESUMES = '  fork_resume_concurrency: 1';
/**
 * The warm build's bound for the boot and for cloud-init (each): on a 2-core
 * machine shared with other guests, the default 600 s has run out before
 * cloud-init finished, failing every file that leases the daemon.
 */
const SHARED_BOOT_TIMEOUT = '  boot_timeout_seconds: 1800';

let shared: Promise<SharedSandboxes> | undefined;

function prepareShared(): Promise<SharedSandboxes> {
  shared ??= (async () => {
    const e = await startSandboxDaemon({ sandboxes: [SHARED_CAPS, SHARED_FORK_RESUMES, SHARED_BOOT_TIMEOUT].join('\n') });
    shareDaemon(e.d);
    await importImages(e);
    const warmId = await warmDone(e, await startWarm(e));
    return { e, warmId };
  })().catch((err) => {
    // A failed preparation is tried again by the next file rather than failing every file with the same stale error.
    shared = undefined;
    throw err;
  });
  return shared;
}

export interface SandboxLease extends SharedSandboxes {
  /** Token secrets by name, made for this file. */
  tokens: Record<string, string>;
  /** Destroys every sandbox of this file's tokens, revokes the tokens, and waits until no QEMU of the daemon runs. */
  release(): Promise<void>;
}

/** The shared sandbox daemon (prepared on first use) with tokens `scopes` (name → scopes) for one test file. */
export async function leaseSharedSandboxes(scopes: Record<string, string[]>): Promise<SandboxLease> {
  const s = await prepareShared();
  const tokens: Record<string, string> = {};
  for (const [name, sc] of Object.entries(scopes)) tokens[name] = await s.e.d.token(name, sc);
  const release = async () => {
    const list = await s.e.d.admin.request('GET', '/admin/sandboxes');
    expect(list.status, JSON.stringify(list.body)).to.equal(200);
    for (const sb of list.body.sandboxes as Array<{ id: string; owner: string; state: string }>) {
      if (!(sb.owner in tokens) || sb.state === 'destroyed') continue;
      const d = await s.e.d.admin.request('POST', '/admin/sandboxes/destroy', { id: sb.id });
      expect(d.status, JSON.stringify(d.body)).to.equal(200);
    }
    for (const name of Object.keys(tokens)) {
      const r = await s.e.d.admin.request('DELETE', `/admin/tokens/${name}`);
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
    }
    await eventually(() => qemuPids(s.e.root).length === 0, 60_000, 'no QEMU of the shared sandbox daemon left');
  };
  return { ...s, tokens, release };
}
