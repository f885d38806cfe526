/**
 * The compose CLI (v2) for compose work: bringing a project to its file,
 * stopping and restarting it. Compose is not re-implemented: hostd renders
 * the file and compose creates, re-creates and orders the containers.
 *
 * It runs with a clean environment (PATH, the engine's address, a private
 * DOCKER_CONFIG) and an empty `--env-file`, so nothing of the daemon's own
 * environment or of a `.env` in the app's data directory reaches the project.
 * Compose v1 (Debian bookworm's docker-compose 1.29) is not used: it is named
 * as unavailable with what to install.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { badRequest } from '../../lib/errors.js';
import { ProgramError, run, stderrTail, which } from '../../lib/run.js';
import { ProbeCache, availableAs, missing, type Availability } from '../../lib/availability.js';
import { COMPOSE, type ProjectRef } from '../driver.js';

export const COMPOSE_INSTALL =
  "compose v2: Debian trixie's docker-compose 2.x or Docker's docker-compose-plugin (deploy/install-deps.sh installs it to /usr/local/lib/docker/cli-plugins)";

/** Where the docker CLI looks for plugins, in its order. */
export function pluginDirs(env: NodeJS.ProcessEnv): string[] {
  const home = env.HOME || os.homedir();
  return [
    ...(env.DOCKER_CONFIG ? [path.join(env.DOCKER_CONFIG, 'cli-plugins')] : []),
    path.join(home, '.docker', 'cli-plugins'),
    '/usr/local/lib/docker/cli-plugins',
    '/usr/local/libexec/docker/cli-plugins',
    '/usr/lib/docker/cli-plugins',
    '/usr/libexec/docker/cli-plugins',
  ];
}

export interface ComposeFound {
  path: string;
  version: string;
}

/** The compose v2 binary: the configured one, else the plugin directories, else docker-compose on PATH. */
export async function findCompose(configured: string | undefined, env: NodeJS.ProcessEnv): Promise<ComposeFound | { reason: string }> {
  const candidates = configured ? [configured] : [...pluginDirs(env).map((d) => path.join(d, 'docker-compose')), 'docker-compose'];
  let v1: string | null = null;
  for (const c of candidates) {
    const p = c.includes('/') ? (fs.existsSync(c) ? c : null) : await which(c);
    if (!p) continue;
    let out: string;
    try {
      out = (await run(p, ['version', '--short'], { timeoutMs: 15_000 })).stdout.trim();
    } catch {
      continue;
    }
    const version = out.replace(/^v/, '');
    if (/^2\./.test(version)) return { path: p, version };
    if (/^1\./.test(version)) v1 = `${p} is compose ${version} (v1)`;
  }
  if (configured && !v1) return { reason: `compose binary ${configured} (apps.compose_binary) does not run; install ${COMPOSE_INSTALL}` };
  return { reason: `${v1 ? `${v1}; hostd needs compose v2` : 'compose v2 is not installed'}: install ${COMPOSE_INSTALL}` };
}

export class ComposeCli {
  /** Where compose is, kept a minute (a binary installed or removed meanwhile is seen by a `fresh` probe). */
  private readonly probe: ProbeCache<ComposeFound | { reason: string }>;

  constructor(
    private readonly configured: string | undefined,
    private readonly env: NodeJS.ProcessEnv,
    /** DOCKER_HOST and TLS variables of the engine. */
    private readonly engineEnv: Record<string, string>,
    /** A private DOCKER_CONFIG directory. */
    private readonly configDir: string,
  ) {
    this.probe = new ProbeCache(() => findCompose(this.configured, this.env));
  }

  async availability(opts: { fresh?: boolean } = {}): Promise<Availability> {
    const r = await this.probe.get(opts);
    return 'reason' in r ? missing(COMPOSE, r.reason) : availableAs(COMPOSE, r.version);
  }

  /** The binary to run: the one found, else the one a missing compose would be (run() names it 503 when absent). */
  private async binary(): Promise<string> {
    const r = await this.probe.get();
    return 'path' in r ? r.path : (this.configured ?? 'docker-compose');
  }

  private async exec(p: ProjectRef, args: string[], opts: { signal?: AbortSignal; timeoutMs?: number } = {}): Promise<void> {
    const bin = await this.binary();
    fs.mkdirSync(this.configDir, { recursive: true, mode: 0o700 });
    const argv = ['--ansi', 'never', '--progress', 'plain', '-p', p.project, '-f', p.file, '--project-directory', p.dir, '--env-file', p.envFile, ...args];
    try {
      await run(bin, argv, {
        cleanEnv: true,
        env: {
          PATH: this.env.PATH ?? '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
          HOME: this.configDir,
          DOCKER_CONFIG: this.configDir,
          ...this.engineEnv,
        },
        timeoutMs: opts.timeoutMs ?? 10 * 60_000,
        signal: opts.signal,
        install: COMPOSE_INSTALL,
      });
    } catch (err) {
      throw composeError(err, args[0]);
    }
  }

  up(p: ProjectRef, start: boolean, signal?: AbortSignal): Promise<void> {
    return this.exec(p, start ? ['up', '-d', '--remove-orphans', '--pull', 'never'] : ['up', '--no-start', '--remove-orphans', '--pull', 'never'], { signal });
  }

  /** `config --quiet`: compose's own validation of the file, creating nothing. */
  check(p: ProjectRef): Promise<void> {
    return this.exec(p, ['config', '--quiet'], { timeoutMs: 60_000 });
  }

  stop(p: ProjectRef): Promise<void> {
    return this.exec(p, ['stop'], { timeoutMs: 5 * 60_000 });
  }

  restart(p: ProjectRef): Promise<void> {
    return this.exec(p, ['restart'], { timeoutMs: 5 * 60_000 });
  }
}

/**
 * Compose's failure as an API error: a file compose refuses to load is 400
 * (nothing was created: compose loads the whole project first), the rest 500
 * with compose's words.
 */
export function composeError(err: unknown, command: string): unknown {
  if (!(err instanceof ProgramError)) return err;
  const text = stderrTail(err.stderr || err.message);
  const sysctl = sysctlRefusal(err.stderr);
  if (sysctl) return badRequest(sysctl);
  if (
    /validating .*: |invalid compose project|yaml: |Additional property|is not allowed|must be a|refers to undefined|depends on undefined|invalid (interpolation|reference format)/i.test(
      err.stderr,
    )
  ) {
    return badRequest(`compose refused the app's compose file: ${text.replace(/^.*?validating [^:]+: /, '')}`);
  }
  if (err.status === 409 || err.code === null) return err;
  return new ProgramError(`docker compose ${command} failed: ${text}`, err.program, err.code, err.stderr, 500);
}

/**
 * runc's refusal of a sysctl, as the caller's error. hostd accepts only the
 * namespaced classes (compose/checks.ts), but within net.* the engine's kernel
 * decides: a key it keeps global has no file in the container's network
 * namespace, and runc fails to open it.
 */
export function sysctlRefusal(stderr: string): string | null {
  const notNs = /sysctl "([^"]+)" (is not in a separate kernel namespace|is not allowed in the hosts? [a-z]+ namespace)/.exec(stderr);
  if (notNs) return `sysctl '${notNs[1]}' is refused by the container runtime: it ${notNs[2].replace(/^is /, 'is ')}`;
  const missing = /open \/proc\/sys\/([^\s:]+): (no such file or directory|read-only file system|permission denied)/i.exec(stderr);
  if (missing) {
    const key = missing[1].replace(/\//g, '.');
    return `sysctl '${key}' cannot be set in the container (${missing[2].toLowerCase()}): the engine's kernel does not namespace it, so it is the host's own setting`;
  }
  return null;
}
