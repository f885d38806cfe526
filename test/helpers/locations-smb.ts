/**
 * A real Samba server for the locations tests, inside a network namespace
 * the test creates (`hdl-<tag>`), so that it can listen on port 445 (which
 * smbnetfs needs) without touching the host's own network, and hostd runs in
 * the same namespace (`nsenter --net`: the network only, so its FUSE mounts
 * are in the host's mount namespace where the test sees them).
 *
 * Shares: `guest` (guest access, writable) and `private` (user `smbtest`
 * with a password). The Samba user is mapped to root through a username
 * map, so the test adds no account to the host. Every state directory is
 * under the test's own temporary directory.
 *
 * For discovery, `withPeer()` adds a second namespace joined by a veth pair
 * (10.x.y.1 server side, 10.x.y.2 hostd side) where nmbd answers NetBIOS.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { findProcesses } from '../../daemon/locations/smb/mounts.js';

const exec = promisify(execFile);

export const SMB_USER = 'smbtest';

export async function have(program: string): Promise<boolean> {
  try {
    await exec('sh', ['-c', 'command -v "$1"', 'sh', program]);
    return true;
  } catch {
    return false;
  }
}

/** Why the locations runtime tests cannot run here, or null. */
export async function missingForLocations(): Promise<string | null> {
  if (process.getuid?.() !== 0) return 'not root (network namespaces and FUSE mounts need root)';
  for (const p of ['smbd', 'smbclient', 'smbpasswd', 'smbnetfs', 'nsenter', 'ip', 'curl']) {
    if (!(await have(p))) return `${p} is not installed (deploy/install-deps.sh installs it)`;
  }
  if (!fs.existsSync('/dev/fuse')) return '/dev/fuse is missing';
  return null;
}

export class SmbLab {
  readonly tag = crypto.randomBytes(3).toString('hex');
  readonly ns = `hdl-${this.tag}`;
  readonly dir: string;
  readonly guestDir: string;
  readonly privateDir: string;
  /** A password with characters that need quoting in every format. */
  readonly password = `Pw-${crypto.randomBytes(6).toString('hex')} "q'\\x#;`;
  /** Second namespace (discovery): set by withPeer(). */
  peerNs: string | null = null;
  serverAddr = '127.0.0.1';
  clientAddr: string | null = null;
  private smbd: ChildProcess | null = null;
  private nmbd: ChildProcess | null = null;
  private made: string[] = [];

  constructor(private readonly opts: { netbiosName?: string } = {}) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-smb-'));
    this.guestDir = path.join(this.dir, 'shares', 'guest');
    this.privateDir = path.join(this.dir, 'shares', 'private');
  }

  get confPath(): string {
    return path.join(this.dir, 'smb.conf');
  }

  /** The namespace smbd runs in (the peer namespace when there is one). */
  get serverNs(): string {
    return this.peerNs ?? this.ns;
  }

  async setup(): Promise<void> {
    try {
      await exec('ip', ['netns', 'add', this.ns]);
      this.made.push(this.ns);
      await exec('ip', ['-n', this.ns, 'link', 'set', 'lo', 'up']);
      this.writeConfig('lo');
      await this.addUser();
    } catch (err) {
      await this.cleanup();
      throw err;
    }
  }

  /** Moves smbd into a second namespace joined by a veth pair (for NetBIOS broadcasts). */
  async withPeer(): Promise<void> {
    const b = crypto.randomBytes(2);
    const net = `10.${200 + (b[0] % 50)}.${b[1] % 250}`;
    this.peerNs = `hdl-${this.tag}-srv`;
    await exec('ip', ['netns', 'add', this.peerNs]);
    this.made.push(this.peerNs);
    const a = `hs${this.tag}`;
    const c = `hc${this.tag}`;
    await exec('ip', ['link', 'add', a, 'type', 'veth', 'peer', 'name', c]);
    await exec('ip', ['link', 'set', a, 'netns', this.peerNs]);
    await exec('ip', ['link', 'set', c, 'netns', this.ns]);
    await exec('ip', ['-n', this.peerNs, 'link', 'set', 'lo', 'up']);
    await exec('ip', ['-n', this.peerNs, 'addr', 'add', `${net}.1/24`, 'dev', a]);
    await exec('ip', ['-n', this.peerNs, 'link', 'set', a, 'up']);
    await exec('ip', ['-n', this.ns, 'addr', 'add', `${net}.2/24`, 'dev', c]);
    await exec('ip', ['-n', this.ns, 'link', 'set', c, 'up']);
    this.serverAddr = `${net}.1`;
    this.clientAddr = `${net}.2`;
    // Nothing may route anywhere but over this link.
    const route = (await exec('ip', ['-n', this.ns, 'route', 'get', this.serverAddr])).stdout;
    if (!route.includes(`dev ${c}`) || /\bvia\b/.test(route)) throw new Error(`unexpected route to ${this.serverAddr}: ${route}`);
    this.writeConfig(a);
  }

  private writeConfig(iface: string): void {
    const st = path.join(this.dir, 'state');
    for (const d of ['lock', 'state', 'cache', 'private', 'pid', 'ncalrpc', 'log']) fs.mkdirSync(path.join(st, d), { recursive: true });
    fs.mkdirSync(this.guestDir, { recursive: true });
    fs.mkdirSync(this.privateDir, { recursive: true });
    fs.writeFileSync(path.join(this.dir, 'usermap'), `root = ${SMB_USER}\n`);
    fs.writeFileSync(
      this.confPath,
      `[global]
  workgroup = HOSTDTEST
  netbios name = ${this.opts.netbiosName ?? `SRV${this.tag.toUpperCase()}`}
  interfaces = ${iface}
  bind interfaces only = yes
  smb ports = 445
  server role = standalone server
  map to guest = Bad User
  guest account = nobody
  lock directory = ${st}/lock
  state directory = ${st}/state
  cache directory = ${st}/cache
  private dir = ${st}/private
  pid directory = ${st}/pid
  ncalrpc dir = ${st}/ncalrpc
  log file = ${st}/log/log.%m
  passdb backend = tdbsam:${st}/private/passdb.tdb
  username map = ${path.join(this.dir, 'usermap')}
  load printers = no
  printing = bsd
  printcap name = /dev/null
  disable spoolss = yes
  disable netbios = no
  server min protocol = SMB2
[guest]
  path = ${this.guestDir}
  guest ok = yes
  read only = no
  force user = root
[private]
  path = ${this.privateDir}
  valid users = root
  read only = no
  force user = root
`,
    );
  }

  private async addUser(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      const c = spawn('smbpasswd', ['-c', this.confPath, '-s', '-a', 'root'], { stdio: ['pipe', 'ignore', 'pipe'] });
      let err = '';
      c.stderr!.on('data', (d) => (err += d));
      c.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`smbpasswd failed: ${err}`))));
      c.stdin!.end(`${this.password}\n${this.password}\n`);
    });
  }

  /** Starts smbd (and nmbd with `netbios`) in the server namespace and waits until it answers. */
  async start(opts: { netbios?: boolean } = {}): Promise<void> {
    if (this.smbd) return;
    // Foreground (a child of this process, so it is reaped), in a process group of its own:
    // smbd signals its whole process group when it stops, which must not be the test runner's.
    const conf = ['-F', '--no-process-group', '-s', this.confPath];
    this.smbd = spawn('ip', ['netns', 'exec', this.serverNs, 'smbd', ...conf], { stdio: 'ignore', detached: true });
    if (opts.netbios) this.nmbd = spawn('ip', ['netns', 'exec', this.serverNs, 'nmbd', ...conf], { stdio: 'ignore', detached: true });
    const end = Date.now() + 15_000;
    for (;;) {
      try {
        await exec('ip', ['netns', 'exec', this.ns, 'smbclient', '-N', '-g', '-L', `//${this.serverAddr}`], { timeout: 5000 });
        return;
      } catch {
        if (Date.now() > end) throw new Error('smbd did not answer within 15 s');
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }

  /** Stops smbd (the share "goes away"). */
  async stop(): Promise<void> {
    for (const p of [this.smbd, this.nmbd]) {
      if (!p || p.exitCode !== null || p.signalCode !== null) continue;
      const gone = new Promise((r) => p.once('exit', r));
      // The whole group: smbd's own children and the samba-dcerpcd it started on demand.
      const group = (sig: NodeJS.Signals) => {
        try {
          process.kill(-p.pid!, sig);
        } catch {
          /* gone */
        }
      };
      group('SIGTERM');
      const t = setTimeout(() => group('SIGKILL'), 5000);
      await gone;
      clearTimeout(t);
      await new Promise((r) => setTimeout(r, 100));
      group('SIGKILL');
    }
    this.smbd = null;
    this.nmbd = null;
    // samba-dcerpcd (started by smbd for share listings) runs in a session of its own: end it by its
    // --configfile, which names this lab's own configuration.
    for (const pid of await processesWithArg(`--configfile=${this.confPath}`)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  }

  /** Runs smbclient in hostd's namespace with the test user's credentials on stdin. */
  async smbclient(share: 'guest' | 'private', command: string): Promise<string> {
    const auth = share === 'private' ? `username=${SMB_USER}\npassword=${this.password}\n` : 'username=guest\npassword=\n';
    return new Promise((resolve, reject) => {
      const c = spawn('ip', ['netns', 'exec', this.ns, 'smbclient', `//${this.serverAddr}/${share}`, '-A', '/dev/stdin', '-c', command], {
        stdio: ['pipe', 'pipe', 'pipe'],
      });
      let out = '';
      c.stdout!.on('data', (d) => (out += d));
      c.stderr!.on('data', (d) => (out += d));
      c.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`smbclient failed (${code}): ${out}`))));
      c.stdin!.end(auth);
    });
  }

  /** The wrap that runs hostd in the lab's network namespace (and only its network). */
  get wrap(): string[] {
    return ['nsenter', `--net=/run/netns/${this.ns}`, '--'];
  }

  async cleanup(): Promise<void> {
    await this.stop().catch(() => undefined);
    for (const ns of this.made.reverse()) await exec('ip', ['netns', 'del', ns]).catch(() => undefined);
    this.made = [];
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Pids of processes that have exactly `arg` among their arguments. */
async function processesWithArg(arg: string): Promise<number[]> {
  const out: number[] = [];
  for (const n of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(n)) continue;
    try {
      if (fs.readFileSync(`/proc/${n}/cmdline`, 'utf8').split('\0').includes(arg)) out.push(Number(n));
    } catch {
      /* gone */
    }
  }
  return out;
}

/** Unmounts and ends whatever a hostd data dir left mounted (a test that failed midway). */
/**
 * A suite's end: hostd stopped and its data dir removed with every mount in
 * it (released before the stop too: the monitor would otherwise mount a
 * share again meanwhile). Either may be missing when the suite was skipped.
 */
export async function stopAndRemoveDataDir(d: { stop(): Promise<void> } | undefined, dataDir: string | undefined): Promise<void> {
  if (dataDir) await releaseDataDirMounts(dataDir);
  await d?.stop();
  if (dataDir) {
    await releaseDataDirMounts(dataDir);
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

export async function releaseDataDirMounts(dataDir: string): Promise<void> {
  const text = fs.readFileSync('/proc/self/mountinfo', 'utf8');
  const points = text
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => !!p && p.startsWith(dataDir + '/'));
  for (const p of points.reverse()) {
    for (const pid of await findProcesses('smbnetfs', p)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
    await exec('umount', ['-l', p]).catch(() => undefined);
  }
}

/** Whether `needle` occurs in any file under `dir` (mount points skipped). */
export function findInFiles(dir: string, needle: string, skip: (p: string) => boolean = () => false): string[] {
  const hits: string[] = [];
  const want = Buffer.from(needle);
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (skip(p)) continue;
      if (e.isDirectory()) walk(p);
      else if (e.isFile()) {
        try {
          if (fs.readFileSync(p).includes(want)) hits.push(p);
        } catch {
          /* vanished */
        }
      }
    }
  };
  walk(dir);
  return hits;
}
