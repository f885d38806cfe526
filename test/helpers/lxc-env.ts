/**
 * LXC runtime test environment: a real hostd with storage pools in temp dirs,
 * the busybox test image imported through `hostctl lxc image import`, and a
 * token. `cleanupLxc()` stops every container those daemons made (lxc-stop -k)
 * before the root hook removes their dirs, also when a test failed.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ALL_SCOPES } from '../../api/registry/index.js';
import { eventually, hostctl, startDaemon, tempDir, type StartOptions, type TestDaemon, type Reply } from './daemon.js';
import { busyboxImage, haveBusybox, type TestImage } from './lxc-image.js';
import { pino } from 'pino';
import { cgroupGroup, createLxcDriver } from '../../daemon/lxc/lxc-tools/index.js';
import { parseSettings } from '../../daemon/lxc/settings.js';
import { requireRuntime } from './runtime-gate.js';

export const API = '/api/v1';

const started: TestDaemon[] = [];

/** Why the LXC runtime tests cannot run here, or null. */
export function lxcMissing(): string | null {
  if (process.getuid?.() !== 0) return 'LXC runtime tests need root';
  for (const p of ['lxc-start', 'lxc-attach', 'lxc-usernsexec', 'newuidmap', 'setfacl', 'mkfs.ext4']) {
    if (spawnSync('sh', ['-c', `command -v ${p}`]).status !== 0) return `${p} is not installed (run deploy/install-deps.sh)`;
  }
  if (!haveBusybox()) return 'busybox-static is not installed (run deploy/install-deps.sh)';
  const sub = fs.existsSync('/etc/subuid') ? fs.readFileSync('/etc/subuid', 'utf8') : '';
  if (!/^root:\d+:(\d+)/m.test(sub)) return 'root has no range in /etc/subuid (run deploy/install-deps.sh)';
  return null;
}

/** What every LXC runtime suite uses, by the names the LXC driver's availability() reports. */
export const LXC_NEEDS = [
  'lxc-start',
  'lxc-stop',
  'lxc-attach',
  'lxc-info',
  'lxc-freeze',
  'lxc-usernsexec',
  'newuidmap',
  'newgidmap',
  'setfacl',
  'mkfs.ext4',
  'cgroups',
  'idmap',
];

/** What the driver cannot say: root, and busybox for the test image. */
function lxcTestMissing(): string | null {
  if (process.getuid?.() !== 0) return 'LXC runtime tests need root';
  if (!haveBusybox()) return 'busybox-static is not installed (run deploy/install-deps.sh)';
  return null;
}

/**
 * The runtime gate of LXC suites: asks the LXC driver itself (what
 * host-status reports) for the programs, the cgroup controllers and the id
 * map, then root and busybox; skips with the reason, or fails under CI.
 */
export async function requireLxc(ctx: Mocha.Context, need: readonly string[] = LXC_NEEDS): Promise<void> {
  const settings = parseSettings(undefined, { dataDir: path.join(os.tmpdir(), 'hostd-lxc-gate'), pools: [] });
  const driver = createLxcDriver(settings, [], pino({ level: 'silent' }));
  await requireRuntime(ctx, 'lxc', driver, { need, also: lxcTestMissing });
}

export interface LxcEnv {
  d: TestDaemon;
  token: string;
  pools: Record<string, string>;
  image: TestImage;
  req(method: string, p: string, body?: unknown, token?: string): Promise<Reply>;
  /** Makes a managed folder through the folders API (the shared storage containers may mount). */
  folder(name: string, storageId?: string): Promise<{ folder_id: string; path: string }>;
}

export interface EnvOptions {
  /** Pool ids (default ['p1']). */
  pools?: string[];
  /** Extra YAML under `lxc:` (indented by the caller with two spaces). */
  lxcYaml?: string;
  env?: Record<string, string>;
  dataDir?: string;
  netns?: string;
  /** Command prefix that launches the daemon (e.g. nsenter into the test's netns). */
  wrap?: string[];
  /** Import the test image as this id (default 'bb'); null: import nothing. */
  imageId?: string | null;
  /** Reuse pools made earlier (restart tests). */
  poolDirs?: Record<string, string>;
}

export function configYaml(pools: Record<string, string>, lxcYaml = ''): string {
  const lines = ['storage_pools:'];
  for (const [id, p] of Object.entries(pools)) lines.push(`  - id: ${id}`, `    path: ${p}`);
  lines.push('lxc:', '  stop_timeout_seconds: 10');
  if (lxcYaml) lines.push(lxcYaml.replace(/\n$/, ''));
  return lines.join('\n') + '\n';
}

export async function lxcEnv(opts: EnvOptions = {}): Promise<LxcEnv> {
  const image = busyboxImage();
  const pools: Record<string, string> = opts.poolDirs ?? {};
  if (!opts.poolDirs) for (const id of opts.pools ?? ['p1']) pools[id] = tempDir(`hostd-lxc-${id}-`);
  const start: StartOptions = { configYaml: configYaml(pools, opts.lxcYaml), env: opts.env, dataDir: opts.dataDir, netns: opts.netns, wrap: opts.wrap };
  const d = await startDaemon(start);
  started.push(d);
  const token = await d.token(`lxc-${Math.random().toString(36).slice(2, 8)}`, [...ALL_SCOPES]);
  const req = (method: string, p: string, body?: unknown, tok = token) => d.request(method, API + p, { token: tok, body });
  const imageId = opts.imageId === undefined ? 'bb' : opts.imageId;
  if (imageId) {
    const have = await req('GET', '/lxc/images');
    if (!have.body.images.some((i: { image_id: string }) => i.image_id === imageId)) {
      const r = await hostctl(d.dataDir, ['lxc', 'image', 'import', image.rootfs, '--id', imageId]);
      if (r.code !== 0) throw new Error(`hostctl lxc image import failed: ${r.stderr}${r.stdout}`);
    }
  }
  const folder = async (name: string, storageId = Object.keys(pools)[0]) => {
    const r = await req('POST', '/folders', { storage_id: storageId, name });
    if (r.status !== 201) throw new Error(`folder create failed: ${r.status} ${JSON.stringify(r.body)}`);
    return { folder_id: r.body.folder.folder_id as string, path: r.body.folder.path as string };
  };
  return { d, token, pools, image, req, folder };
}

/** Waits for a task to end; returns its record. */
export async function waitTask(env: LxcEnv, taskId: string, ms = 60_000): Promise<any> {
  return eventually(
    async () => {
      const r = await env.req('GET', `/tasks/${taskId}`);
      return r.body?.task && ['succeeded', 'failed'].includes(r.body.task.state) ? r.body.task : undefined;
    },
    ms,
    `task ${taskId}`,
  );
}

/** The pid of the LXC monitor of a container (its command socket lives in the monitor's network namespace). */
function monitorPid(lxcPath: string, name: string): number | null {
  for (const d of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = fs.readFileSync(`/proc/${d}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
      if (cmd === `[lxc monitor] ${lxcPath} ${name}`) return Number(d);
    } catch {
      /* gone */
    }
  }
  return null;
}

/**
 * Containers of a daemon's lxcpath, stopped at once: lxc-stop runs in the
 * monitor's network namespace (LXC's command socket is an abstract socket,
 * so a container started in a test's namespace answers only there).
 */
export function killContainers(dataDir: string): void {
  const lxcPath = path.join(dataDir, 'lxc');
  let names: string[] = [];
  try {
    names = fs.readdirSync(lxcPath).filter((n) => n.startsWith('svc-lxc-'));
  } catch {
    return;
  }
  for (const n of names) {
    const pid = monitorPid(lxcPath, n);
    if (!pid) continue;
    spawnSync('nsenter', ['-t', String(pid), '-n', 'lxc-stop', '-P', lxcPath, '-n', n, '-k'], { timeout: 30_000 });
  }
}

/** Removes the (empty, once its containers stopped) cgroup group of a daemon's lxcpath from every hierarchy. */
export function removeCgroupGroup(dataDir: string): void {
  const group = cgroupGroup(path.join(dataDir, 'lxc'));
  let roots: string[] = [];
  try {
    roots = fs.readdirSync('/sys/fs/cgroup').map((c) => path.join('/sys/fs/cgroup', c));
  } catch {
    return;
  }
  for (const r of [...roots, '/sys/fs/cgroup']) {
    const g = path.join(r, group);
    if (!fs.existsSync(g)) continue;
    try {
      for (const sub of fs.readdirSync(g, { withFileTypes: true })) if (sub.isDirectory()) fs.rmdirSync(path.join(g, sub.name));
      fs.rmdirSync(g);
    } catch {
      /* still in use: leave it */
    }
  }
}

/** Stops every container of every daemon this helper started (call from an after hook). */
export async function cleanupLxc(): Promise<void> {
  for (const d of started.splice(0)) {
    killContainers(d.dataDir);
    await d.stop().catch(() => undefined);
    removeCgroupGroup(d.dataDir);
  }
}

/** The host pid of the container's init (lxc-info). */
export function initPid(dataDir: string, lxcid: number): number {
  const out = execFileSync('lxc-info', ['-P', path.join(dataDir, 'lxc'), '-n', `svc-lxc-${lxcid}`, '-p', '-H'])
    .toString()
    .trim();
  return Number(out);
}

export function lxcState(dataDir: string, lxcid: number): string {
  return execFileSync('lxc-info', ['-P', path.join(dataDir, 'lxc'), '-n', `svc-lxc-${lxcid}`, '-s', '-H'])
    .toString()
    .trim();
}

/** A cgroup v1 controller directory of a running container (from its init's /proc/<pid>/cgroup). */
export function cgroupDir(dataDir: string, lxcid: number, controller: string): string {
  const pid = initPid(dataDir, lxcid);
  const line = fs
    .readFileSync(`/proc/${pid}/cgroup`, 'utf8')
    .split('\n')
    .find((l) => l.split(':')[1]?.split(',').includes(controller));
  if (!line) throw new Error(`no ${controller} cgroup for container ${lxcid}`);
  return path.join('/sys/fs/cgroup', controller, line.split(':')[2]);
}
