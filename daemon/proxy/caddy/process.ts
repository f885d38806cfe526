/**
 * The Caddy process hostd runs on the lease holder: `caddy run` with a
 * bootstrap configuration (admin socket, storage root), the real one applied
 * through the admin API afterwards.
 *
 * Caddy is tied to hostd's life: it is started under `setpriv --pdeathsig
 * KILL`, so that a hostd that dies (kill -9 included) never leaves a proxy
 * answering while another node takes the lease over. HOME and the XDG
 * directories point under the data dir: Caddy (and smallstep inside it)
 * writes nowhere else, and never into a system trust store.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import type { Logger } from 'pino';
import { CaddyAdmin } from './admin.js';
import { bootConfig } from './build.js';
import { availableAs, missing, type Availability } from '../../lib/availability.js';
import { run, which } from '../../lib/run.js';
import type { CaddyLogLine } from '../driver.js';

export interface CaddyProbe {
  caddy: Availability;
  setpriv: Availability;
  /** Every module of the build (`caddy list-modules`). */
  modules: Set<string>;
}

const RING = 400;

/** Runs `caddy version` and `caddy list-modules` once. */
export async function probeCaddy(binary = 'caddy'): Promise<CaddyProbe> {
  let caddy: Availability;
  let modules = new Set<string>();
  try {
    const v = await run(binary, ['version'], { timeoutMs: 10_000, install: 'the caddy package (apt-get install caddy)' });
    const version = v.stdout.trim().split(/\s+/)[0]?.replace(/^v/, '') ?? null;
    caddy = availableAs('caddy', version);
    const m = await run(binary, ['list-modules'], { timeoutMs: 10_000 });
    modules = new Set(
      m.stdout
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !l.includes(' ')),
    );
  } catch (err) {
    caddy = missing('caddy', `${(err as Error).message}`.includes('not installed') ? 'caddy is not installed (apt-get install caddy)' : (err as Error).message);
  }
  const sp = await which('setpriv');
  const setpriv = sp ? availableAs('setpriv', null) : missing('setpriv', 'setpriv is not installed (apt-get install util-linux)');
  return { caddy, setpriv, modules };
}

export class CaddyProcess {
  readonly home: string;
  readonly storage: string;
  readonly adminSocket: string;
  readonly admin: CaddyAdmin;
  private child: ChildProcess | null = null;
  private readonly ring: CaddyLogLine[] = [];
  private readonly exitListeners = new Set<(code: number | null, signal: string | null) => void>();
  private stopping = false;

  constructor(
    readonly dir: string,
    private readonly log: Logger,
    private readonly binary = 'caddy',
  ) {
    this.home = path.join(dir, 'caddy');
    this.storage = path.join(dir, 'caddy', 'storage');
    this.adminSocket = path.join(dir, 'run', 'caddy-admin.sock');
    this.admin = new CaddyAdmin(this.adminSocket);
  }

  get running(): boolean {
    return this.child !== null && this.child.exitCode === null && this.child.signalCode === null;
  }

  get pid(): number | null {
    return this.running ? (this.child!.pid ?? null) : null;
  }

  get bootFile(): string {
    return path.join(this.dir, 'run', 'caddy-boot.json');
  }

  /** Called when Caddy exits without stop() having asked it to. */
  onExit(cb: (code: number | null, signal: string | null) => void): () => void {
    this.exitListeners.add(cb);
    return () => this.exitListeners.delete(cb);
  }

  /**
   * Caddy keeps the local CA's intermediate in its storage and reuses it
   * whatever root it is given (2.6): when the root changes (the node joined or
   * left a cluster), the old intermediate goes, so that Caddy signs a new one
   * with the new root. A marker file names the root the stored one belongs to.
   */
  useRoot(caRoot: { fingerprint: string }): void {
    const dir = path.join(this.storage, 'pki', 'authorities', 'local');
    const marker = path.join(dir, 'hostd-root.sha256');
    let had = '';
    try {
      had = fs.readFileSync(marker, 'utf8').trim();
    } catch {
      /* no marker: whatever is stored is not ours */
    }
    if (had === caRoot.fingerprint) return;
    for (const f of ['intermediate.crt', 'intermediate.key', 'root.crt', 'root.key']) fs.rmSync(path.join(dir, f), { force: true });
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    fs.writeFileSync(marker, caRoot.fingerprint + '\n');
  }

  /** Caddy's recent log lines, oldest first. */
  recent(n = 100): CaddyLogLine[] {
    return this.ring.slice(-n);
  }

  /** Starts Caddy with the admin socket, the storage and the internal CA's root. */
  async start(caRoot: { certFile: string; keyFile: string; fingerprint: string }): Promise<void> {
    if (this.running) return;
    for (const d of [this.home, this.storage, path.dirname(this.adminSocket)]) fs.mkdirSync(d, { recursive: true, mode: 0o700 });
    fs.rmSync(this.adminSocket, { force: true });
    this.useRoot(caRoot);
    fs.writeFileSync(this.bootFile, JSON.stringify(bootConfig({ adminSocket: this.adminSocket, storageRoot: this.storage, caRoot })), { mode: 0o600 });
    const env: Record<string, string> = {
      PATH: process.env.PATH ?? '/usr/sbin:/usr/bin:/sbin:/bin',
      HOME: this.home,
      XDG_DATA_HOME: path.join(this.home, 'data'),
      XDG_CONFIG_HOME: path.join(this.home, 'config'),
    };
    this.stopping = false;
    const child = spawn('setpriv', ['--pdeathsig', 'KILL', '--', this.binary, 'run', '--config', this.bootFile], {
      cwd: this.home,
      env,
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    this.child = child;
    const rl = readline.createInterface({ input: child.stderr! });
    rl.on('line', (line) => this.keep(line));
    const state: { exited: { code: number | null; signal: string | null } | null } = { exited: null };
    child.once('exit', (code, signal) => {
      state.exited = { code, signal };
      if (this.child === child) this.child = null;
      if (!this.stopping) {
        this.log.warn({ code, signal }, 'caddy exited');
        for (const cb of this.exitListeners) cb(code, signal);
      }
    });
    child.once('error', (err) => this.keep(JSON.stringify({ level: 'error', logger: 'hostd', msg: `cannot start caddy: ${err.message}` })));
    const deadline = Date.now() + 15_000;
    while (!(await this.admin.ping())) {
      const ex = state.exited;
      if (ex) throw new Error(`caddy exited while starting (${ex.code ?? ex.signal}): ${this.lastError() ?? 'no log'}`);
      if (Date.now() > deadline) {
        await this.stop();
        throw new Error(`caddy's admin socket did not answer within 15 s: ${this.lastError() ?? 'no log'}`);
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    this.log.info({ pid: child.pid }, 'caddy started');
  }

  async stop(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) {
      this.child = null;
      return;
    }
    this.stopping = true;
    const done = new Promise<void>((r) => child.once('exit', () => r()));
    child.kill('SIGTERM');
    const t = setTimeout(() => child.kill('SIGKILL'), 5000);
    await done;
    clearTimeout(t);
    this.child = null;
    this.log.info('caddy stopped');
  }

  private keep(line: string): void {
    let rec: Record<string, unknown>;
    try {
      rec = JSON.parse(line) as Record<string, unknown>;
    } catch {
      rec = { level: 'info', msg: line };
    }
    const { ts, level, logger, msg, ...fields } = rec;
    // The admin API logs each request's headers: none carries a secret (bodies are not logged).
    this.ring.push({
      ts: typeof ts === 'number' ? new Date(ts * 1000).toISOString() : new Date().toISOString(),
      level: String(level ?? 'info'),
      logger: String(logger ?? ''),
      msg: String(msg ?? ''),
      fields,
    });
    if (this.ring.length > RING) this.ring.splice(0, this.ring.length - RING);
  }

  private lastError(): string | null {
    const e = [...this.ring].reverse().find((l) => l.level === 'error' || l.level === 'fatal');
    return e ? `${e.msg}${e.fields.error ? `: ${String(e.fields.error)}` : ''}` : null;
  }
}
