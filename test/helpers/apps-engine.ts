/**
 * A private Docker engine for the apps tests and bench, isolated from the host:
 *
 * - its own network namespace (made here, removed at stop): the compose
 *   projects' bridges, routes, docker-proxy listeners and any published port
 *   live there, so the host's interfaces, routes, iptables and sysctls are
 *   never touched (and `--iptables=false --ip-forward=false --ip-masq=false
 *   --bridge=none` besides);
 * - its own mount namespace: a fresh sysfs for the network namespace (with the
 *   host's cgroup tree bound back in) and a private directory bound over
 *   /etc/docker, where dockerd 20.10 writes key.json whatever its data root;
 * - its own data root, exec root, pidfile and API socket under a temp dir.
 *
 * The test image is a busybox-static rootfs made here, cached on disk outside
 * the repo keyed by a hash of its recipe, and `docker import`ed into the
 * engine (no registry is reachable). `hostState()` snapshots what a Docker
 * engine would change on the host, so a test can assert it is unchanged.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { DockerDriver } from '../../daemon/apps/docker/driver.js';
import type { Availability } from '../../daemon/lib/availability.js';

const exec = promisify(execFile);

export const CACHE_ROOT = path.join(process.env.HOSTD_TEST_CACHE ?? '/var/cache/hostd-test', 'apps');

/** Where the compose v2 binary is looked for (what deploy/install-deps.sh installs first). */
export const COMPOSE_CANDIDATES = [
  '/usr/local/lib/docker/cli-plugins/docker-compose',
  '/usr/libexec/docker/cli-plugins/docker-compose',
  '/usr/lib/docker/cli-plugins/docker-compose',
];

async function which(p: string): Promise<string | null> {
  try {
    const r = await exec('sh', ['-c', 'command -v "$1"', 'sh', p]);
    return r.stdout.trim() || null;
  } catch {
    return null;
  }
}

/** The compose v2 binary, or null. */
export async function composeBinary(): Promise<string | null> {
  for (const c of COMPOSE_CANDIDATES) {
    try {
      const r = await exec(c, ['version', '--short'], { timeout: 10_000 });
      if (/^v?2\./.test(r.stdout.trim())) return c;
    } catch {
      /* next */
    }
  }
  return null;
}

/**
 * What the runtime gate asks (requireRuntime): the apps domain's own driver,
 * as a daemon of the tests would build it. The engine the suites use is a
 * private dockerd they start themselves, so the gate asks the driver for
 * compose only and `missingRuntime` for what starting that engine takes.
 */
export function appsRuntime(): () => Promise<Availability[]> {
  return () => new DockerDriver({ env: process.env, configDir: path.join(os.tmpdir(), 'hostd-apps-gate-unused') }).availability({ fresh: true });
}

/** What starting the suites' private engine takes beyond the driver's programs (root, dockerd, namespaces, the image's busybox), or null. */
export async function missingRuntime(): Promise<string | null> {
  if (process.getuid?.() !== 0) return 'the apps runtime tests need root (a private dockerd)';
  for (const p of ['dockerd', 'unshare', 'nsenter', 'ip', 'busybox']) {
    if (!(await which(p))) return `${p} is not installed (run deploy/install-deps.sh)`;
  }
  return null;
}

export interface HostState {
  ipForward: string;
  iptables: string;
  links: string[];
}

/** What a Docker engine changes on a host: forwarding sysctl, iptables rules, bridges. */
export async function hostState(): Promise<HostState> {
  const ipForward = fs.readFileSync('/proc/sys/net/ipv4/ip_forward', 'utf8').trim();
  let iptables = '';
  try {
    // Only the lines Docker would add (its chains, a FORWARD policy, MASQUERADE): other helpers may be changing other rules.
    const r = await exec('iptables-save', [], { timeout: 10_000 });
    iptables = r.stdout
      .split('\n')
      .filter((l) => /DOCKER|MASQUERADE|^:FORWARD/.test(l))
      .join('\n');
  } catch {
    iptables = '(iptables-save unavailable)';
  }
  const links = (await exec('ip', ['-o', 'link', 'show'])).stdout
    .split('\n')
    .map((l) => l.split(':')[1]?.trim().split('@')[0] ?? '')
    .filter((n) => /^(docker0|br-|veth)/.test(n))
    .sort();
  return { ipForward, iptables, links };
}

export interface TestEngine {
  /** DOCKER_HOST value for the engine. */
  host: string;
  sock: string;
  dir: string;
  netns: string;
  /** Runs a command inside the engine's network namespace (clients of published ports). */
  inNetns(cmd: string[], timeoutMs?: number): Promise<{ code: number; stdout: string; stderr: string }>;
  /** Runs Debian's docker CLI against the engine. */
  docker(args: string[], timeoutMs?: number): Promise<{ code: number; stdout: string; stderr: string }>;
  stop(): Promise<void>;
}

function runQuiet(
  file: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const c = execFile(file, args, { env: opts.env ?? process.env, timeout: opts.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? (err as { code: number }).code : 1) : 0;
      resolve({ code, stdout: String(stdout), stderr: String(stderr) });
    });
    if (opts.input !== undefined) c.stdin?.end(opts.input);
  });
}

const engines = new Set<TestEngine>();

/**
 * Starts a private engine; resolves when its API answers (bounded). The
 * engine, its namespace and its directory are removed by `stop()` (and by
 * `stopEngines()` in an after hook, also when a test failed).
 */
export async function startEngine(): Promise<TestEngine> {
  const tag = crypto.randomBytes(3).toString('hex');
  // Short paths: containerd's sockets under the exec root must fit in 108 bytes.
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `hde-${tag}-`));
  const netns = `hostd-apps-${tag}`;
  for (const d of ['data', 'exec', 'etc', 'cg']) fs.mkdirSync(path.join(dir, d));
  const sock = path.join(dir, 'docker.sock');
  await exec('ip', ['netns', 'add', netns]);
  await exec('ip', ['-n', netns, 'link', 'set', 'lo', 'up']);
  const script = [
    'set -e',
    'D="$1"',
    // A sysfs of the new network namespace, with the host's cgroup tree bound back in (dockerd needs both).
    'mount --rbind /sys/fs/cgroup "$D/cg"',
    'mount -t sysfs sysfs /sys',
    'mount --rbind "$D/cg" /sys/fs/cgroup',
    'mount --bind "$D/etc" /etc/docker',
    'exec dockerd --data-root "$D/data" --exec-root "$D/exec" --pidfile "$D/docker.pid" -H "unix://$D/docker.sock" ' +
      '--iptables=false --ip-masq=false --ip-forward=false --bridge=none --log-level=warn',
  ].join('\n');
  const log = fs.openSync(path.join(dir, 'dockerd.log'), 'a');
  const proc: ChildProcess = spawn('nsenter', [`--net=/run/netns/${netns}`, 'unshare', '-m', '--propagation', 'private', 'sh', '-c', script, 'sh', dir], {
    stdio: ['ignore', log, log],
    detached: true,
  });
  fs.closeSync(log);
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const env = { ...process.env, DOCKER_HOST: `unix://${sock}` };
  const engine: TestEngine = {
    host: `unix://${sock}`,
    sock,
    dir,
    netns,
    inNetns: (cmd, timeoutMs) => runQuiet('ip', ['netns', 'exec', netns, ...cmd], { timeoutMs }),
    docker: (args, timeoutMs) => runQuiet('/usr/bin/docker', args, { env, timeoutMs }),
    stop: async () => {
      engines.delete(engine);
      if (proc.exitCode === null && proc.signalCode === null) {
        // Containers first, so that no shim keeps the namespaces alive.
        const ids = (await engine.docker(['ps', '-aq'], 30_000)).stdout.split('\n').filter(Boolean);
        if (ids.length) await engine.docker(['rm', '-f', ...ids], 60_000);
        proc.kill('SIGTERM');
        const t = setTimeout(() => proc.kill('SIGKILL'), 20_000);
        await exited;
        clearTimeout(t);
      }
      await runQuiet('ip', ['netns', 'del', netns]);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
  engines.add(engine);
  const end = Date.now() + 30_000;
  for (;;) {
    const r = await engine.docker(['version', '--format', '{{.Server.Version}}'], 5_000);
    if (r.code === 0) break;
    if (proc.exitCode !== null || Date.now() > end) {
      const text = fs.existsSync(path.join(dir, 'dockerd.log')) ? fs.readFileSync(path.join(dir, 'dockerd.log'), 'utf8') : '';
      await engine.stop();
      throw new Error(`private dockerd did not start within 30 s: ${text.slice(-1500)}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return engine;
}

export async function stopEngines(): Promise<void> {
  for (const e of [...engines]) await e.stop();
}

/** The files of the test rootfs: busybox-static and the applets the tests use. */
const APPLETS = ['sh', 'httpd', 'sleep', 'echo', 'cat', 'ls', 'dd', 'yes', 'head', 'mkdir', 'touch', 'sync', 'wc', 'true', 'kill'];
const RECIPE = `v1 busybox-static rootfs; applets ${APPLETS.join(',')}; dirs tmp,etc,proc,sys,dev,www,data`;

/** The rootfs tar, built once per machine (cache keyed by the recipe and busybox's bytes). */
export async function testRootfsTar(): Promise<string> {
  const busybox = (await which('busybox'))!;
  const real = fs.realpathSync(busybox);
  const hash = crypto.createHash('sha256').update(RECIPE).update(fs.readFileSync(real)).digest('hex').slice(0, 16);
  const tar = path.join(CACHE_ROOT, `busybox-rootfs-${hash}.tar`);
  if (fs.existsSync(tar)) return tar;
  fs.mkdirSync(CACHE_ROOT, { recursive: true });
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-apps-rootfs-'));
  try {
    fs.mkdirSync(path.join(work, 'bin'));
    fs.copyFileSync(real, path.join(work, 'bin/busybox'));
    fs.chmodSync(path.join(work, 'bin/busybox'), 0o755);
    for (const a of APPLETS) fs.symlinkSync('busybox', path.join(work, 'bin', a));
    for (const d of ['tmp', 'etc', 'proc', 'sys', 'dev', 'www', 'data']) fs.mkdirSync(path.join(work, d));
    fs.chmodSync(path.join(work, 'tmp'), 0o1777);
    fs.writeFileSync(path.join(work, 'www/index.html'), 'hello from the hostd test image\n');
    fs.writeFileSync(path.join(work, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
    const tmp = `${tar}.${process.pid}.tmp`;
    await exec('tar', ['-C', work, '--owner=0', '--group=0', '--numeric-owner', '-cf', tmp, '.']);
    fs.renameSync(tmp, tar);
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
  return tar;
}

/** Imports the test rootfs into the engine under `tag` (default hostd-test/busybox:<recipe hash>). */
export async function importTestImage(engine: TestEngine, tag?: string): Promise<string> {
  const tar = await testRootfsTar();
  const name = tag ?? `hostd-test/busybox:${path.basename(tar, '.tar').slice(-16)}`;
  const r = await engine.docker(['import', '-c', 'CMD ["/bin/sh"]', tar, name], 60_000);
  if (r.code !== 0) throw new Error(`docker import failed: ${r.stderr}`);
  return name;
}
