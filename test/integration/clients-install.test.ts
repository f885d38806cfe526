/**
 * hostd and hostctl as installed commands: every entry point works or fails
 * with a message; hostctl finds the daemon from the config the daemon uses,
 * from any working directory; deploy/install.sh puts both on a PATH; and the
 * systemd unit's own command line runs with the config file deciding (the
 * unit sets no value of its own).
 */
import { expect } from 'chai';
import { spawn, type ChildProcessByStdio } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import type { Readable } from 'node:stream';
import { ROOT, onFreePorts, runCommand, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { findSocket } from '../../daemon/cli/hostctl.js';
import { configFileOf, loadConfig, socketPath } from '../../daemon/config.js';
import { API } from '../helpers/conformance.js';

/** Runs a command in `cwd` with exactly `env` (plus PATH), as a shell would. */
function runIn(cwd: string, file: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const c = spawn(file, args, { cwd, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    c.stdout.on('data', (d) => (stdout += d));
    c.stderr.on('data', (d) => (stderr += d));
    const t = setTimeout(() => c.kill('SIGKILL'), 30_000);
    c.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code: code ?? 1, stdout, stderr });
    });
  });
}

describe('hostd and hostctl as commands', function () {
  let d: TestDaemon;
  let config: string;
  let outside: string;

  before(async function () {
    this.timeout(60_000);
    const dataDir = tempDir('hostd-cmd-data-');
    d = await startDaemon({ dataDir });
    // A config file naming the daemon's data dir, as /etc/hostd/config.yaml would.
    config = path.join(tempDir('hostd-cmd-etc-'), 'config.yaml');
    fs.writeFileSync(config, `data_dir: ${JSON.stringify(dataDir)}\n`);
    outside = tempDir('hostd-cmd-cwd-');
  });

  describe('entry points', function () {
    const entries = () => [
      [process.execPath, path.join(ROOT, 'bin/hostctl.js')],
      [path.join(ROOT, 'bin/hostctl.js')],
      [process.execPath, path.join(ROOT, 'dist/daemon/cli/hostctl.js')],
      [process.execPath, path.join(ROOT, 'dist/daemon/cli/main.js')],
      [process.execPath, path.join(ROOT, 'daemon/cli/pkg/hostctl.js')],
      [path.join(ROOT, 'node_modules/.bin/hostctl')],
    ];

    it('package.json installs hostd and hostctl as commands, executable files', () => {
      const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
      expect(pkg.bin).to.deep.equal({ hostd: 'bin/hostd.js', hostctl: 'bin/hostctl.js' });
      for (const f of Object.values<string>(pkg.bin)) {
        const full = path.join(ROOT, f);
        expect(fs.statSync(full).mode & 0o111, f).to.not.equal(0);
        expect(fs.readFileSync(full, 'utf8').startsWith('#!/usr/bin/env node\n'), f).to.equal(true);
      }
    });

    it('every hostctl entry point runs hostctl: usage, a refused unknown command, a real command', async function () {
      this.timeout(60_000);
      for (const [file, ...pre] of entries()) {
        const where = [file, ...pre].join(' ');
        const help = await runIn(outside, file, [...pre, '--help']);
        expect([help.code, help.stdout.split('\n')[0]], where).to.deep.equal([
          0,
          'usage: hostctl [--config FILE | --data-dir DIR | --socket PATH | --url URL --token TOKEN] <command>',
        ]);
        const bad = await runIn(outside, file, [...pre, 'no-such-command']);
        expect(bad.code, where).to.equal(2);
        expect(bad.stderr, where).to.contain("hostctl: unknown command 'no-such-command'");
        const list = await runIn(outside, file, [...pre, '--config', config, 'token', 'list']);
        expect([list.code, list.stderr], where).to.deep.equal([0, '']);
        expect(list.stdout, where).to.match(/^NAME\s+SCOPES/);
      }
    });

    it('hostd answers --help and --version, refuses an unknown option, and takes --config FILE', async function () {
      this.timeout(60_000);
      const hostd = path.join(ROOT, 'bin/hostd.js');
      const help = await runIn(outside, hostd, ['--help']);
      expect([help.code, help.stdout.split('\n')[0]]).to.deep.equal([0, 'usage: hostd [--config FILE]']);
      const version = await runIn(outside, hostd, ['--version']);
      expect(version.code).to.equal(0);
      expect(version.stdout).to.match(/^hostd \d+\.\d+\.\d+\n$/);
      const bad = await runIn(outside, hostd, ['--nope']);
      expect(bad.code).to.equal(2);
      expect(bad.stderr).to.contain("hostd: Unknown option '--nope'");
      const missing = await runIn(outside, hostd, ['--config', path.join(outside, 'absent.yaml')]);
      expect(missing.code).to.equal(2);
      expect(missing.stderr).to.contain(`hostd: cannot read the config file ${path.join(outside, 'absent.yaml')}`);
    });

    it('hostd without a build fails with a message, not a stack trace', async function () {
      this.timeout(30_000);
      // A copy of the bin file in a tree without dist/.
      const tree = tempDir('hostd-cmd-nobuild-');
      fs.mkdirSync(path.join(tree, 'bin'));
      for (const f of ['hostd.js', 'hostctl.js']) fs.copyFileSync(path.join(ROOT, 'bin', f), path.join(tree, 'bin', f));
      for (const [f, name] of [
        ['hostd.js', 'hostd'],
        ['hostctl.js', 'hostctl'],
      ]) {
        const r = await runIn(outside, process.execPath, [path.join(tree, 'bin', f), '--help']);
        expect(r.code).to.equal(1);
        expect(r.stderr).to.equal(
          `${name}: ${path.join(tree, 'dist')}/${name === 'hostd' ? 'daemon/main.js' : 'daemon/cli/main.js'} is missing: build hostd first (npm ci, or npm run build, in ${tree}/)\n`,
        );
      }
    });
  });

  describe('finding the daemon', function () {
    it('from any working directory, through the config file the daemon uses (HOSTD_CONFIG or --config)', async function () {
      this.timeout(30_000);
      const hostctl = path.join(ROOT, 'bin/hostctl.js');
      const sub = path.join(ROOT, 'test');
      for (const cwd of [outside, sub, '/']) {
        const viaEnv = await runIn(
          cwd,
          hostctl,
          ['token', 'create', '--name', `from-${cwd.length}-${Math.random().toString(36).slice(2, 8)}`, '--scopes', 'files.read'],
          { HOSTD_CONFIG: config },
        );
        expect(viaEnv.code, `${cwd}: ${viaEnv.stderr}`).to.equal(0);
        expect((await d.request('GET', `${API}/folders`, { token: viaEnv.stdout.trim() })).status).to.equal(200);
        const viaFlag = await runIn(cwd, hostctl, ['--config', config, 'token', 'list']);
        expect(viaFlag.code, `${cwd}: ${viaFlag.stderr}`).to.equal(0);
      }
    });

    it('finds its socket as the daemon finds its data dir: flags, HOSTD_CONFIG, the system config, HOSTD_DATA_DIR, ./data, the checkout', () => {
      const etc = tempDir('hostd-cmd-sys-');
      const sys = path.join(etc, 'config.yaml');
      const none = path.join(etc, 'absent.yaml');
      fs.writeFileSync(sys, 'data_dir: /srv/hostd-data\n');
      expect(findSocket({ socket: '/x/s.sock' }, {}, sys).socket).to.equal('/x/s.sock');
      expect(findSocket({ dataDir: '/x/d' }, {}, sys).socket).to.equal('/x/d/hostd.sock');
      // The system config when HOSTD_CONFIG is unset; the daemon reads the same file.
      const fromSys = findSocket({}, {}, sys);
      expect(fromSys).to.deep.equal({ socket: '/srv/hostd-data/hostd.sock', how: `the data dir from data_dir in ${sys}` });
      expect(loadConfig({}, sys).dataDir).to.equal('/srv/hostd-data');
      expect(configFileOf({}, sys)).to.equal(sys);
      // HOSTD_CONFIG names another file; set but empty means none.
      expect(findSocket({}, { HOSTD_CONFIG: config }, sys).socket).to.equal(d.socket);
      expect(configFileOf({ HOSTD_CONFIG: '' }, sys)).to.equal(undefined);
      expect(findSocket({ config }, {}, sys).socket).to.equal(d.socket);
      // HOSTD_DATA_DIR overrides the file's value, as it does for the daemon.
      expect(findSocket({}, { HOSTD_DATA_DIR: '/y' }, sys).socket).to.equal('/y/hostd.sock');
      // No config at all: ./data, else the data/ of the checkout (where `npm start` keeps it).
      const checkout = tempDir('hostd-cmd-checkout-');
      const cwd = process.cwd();
      const noConfig = findSocket({ packageRoot: checkout }, {}, none);
      expect(noConfig.socket).to.equal(path.join(cwd, 'data', 'hostd.sock'));
      expect(noConfig.how).to.contain(`there is no ${none}`);
      fs.mkdirSync(path.join(checkout, 'data'));
      fs.writeFileSync(socketPath(path.join(checkout, 'data')), '');
      if (!fs.existsSync(path.join(cwd, 'data', 'hostd.sock'))) {
        expect(findSocket({ packageRoot: checkout }, {}, none).socket).to.equal(path.join(checkout, 'data', 'hostd.sock'));
      }
    });

    it('says where it looked and how to name the daemon when it cannot reach one', async () => {
      const r = await runIn(outside, path.join(ROOT, 'bin/hostctl.js'), ['token', 'list'], { HOSTD_CONFIG: '' });
      expect(r.code).to.equal(1);
      expect(r.stderr).to.contain(`cannot reach hostd at ${path.join(outside, 'data', 'hostd.sock')}`);
      expect(r.stderr).to.contain('--config FILE');
    });
  });

  describe('deploy/install.sh', function () {
    it('puts hostd and hostctl on a PATH, writes the config once, and the installed hostctl works from anywhere', async function () {
      this.timeout(60_000);
      const stage = tempDir('hostd-cmd-install-');
      const dirs = { bin: path.join(stage, 'bin'), etc: path.join(stage, 'etc'), units: path.join(stage, 'units'), data: path.join(stage, 'data') };
      const args = ['--bin-dir', dirs.bin, '--etc-dir', dirs.etc, '--unit-dir', dirs.units, '--data-dir', dirs.data, '--no-systemctl'];
      const r = await runCommand('bash', [path.join(ROOT, 'deploy/install.sh'), ...args]);
      expect(r.code, r.stderr).to.equal(0);
      expect(fs.readlinkSync(path.join(dirs.bin, 'hostctl'))).to.equal(path.join(ROOT, 'bin/hostctl.js'));
      expect(fs.readlinkSync(path.join(dirs.bin, 'hostd'))).to.equal(path.join(ROOT, 'bin/hostd.js'));
      const cfg = fs.readFileSync(path.join(dirs.etc, 'config.yaml'), 'utf8');
      expect(cfg).to.contain(`data_dir: ${dirs.data}`);
      const unit = fs.readFileSync(path.join(dirs.units, 'hostd.service'), 'utf8');
      expect(unit).to.contain(`ExecStart=${dirs.bin}/hostd\n`);
      expect(unit).to.contain(`Environment=HOSTD_CONFIG=${dirs.etc}/config.yaml\n`);
      // A second run keeps the operator's edits.
      fs.writeFileSync(path.join(dirs.etc, 'config.yaml'), `data_dir: ${JSON.stringify(d.dataDir)}\n`);
      expect((await runCommand('bash', [path.join(ROOT, 'deploy/install.sh'), ...args])).code).to.equal(0);
      expect(fs.readFileSync(path.join(dirs.etc, 'config.yaml'), 'utf8')).to.equal(`data_dir: ${JSON.stringify(d.dataDir)}\n`);
      // `hostctl` by name, from /, as an operator types it.
      const ctl = await runIn('/', 'hostctl', ['token', 'list'], { PATH: `${dirs.bin}:${process.env.PATH}`, HOSTD_CONFIG: path.join(dirs.etc, 'config.yaml') });
      expect(ctl.code, ctl.stderr).to.equal(0);
      expect(ctl.stdout).to.match(/^NAME\s+SCOPES/);
    });
  });

  describe('deploy/hostd.service', function () {
    it('sets no value of its own: only HOSTD_CONFIG, pointing at /etc/hostd/config.yaml', () => {
      const unit = fs.readFileSync(path.join(ROOT, 'deploy/hostd.service'), 'utf8');
      const envs = unit.split('\n').filter((l) => l.startsWith('Environment='));
      expect(envs).to.deep.equal(['Environment=HOSTD_CONFIG=/etc/hostd/config.yaml']);
      expect(unit).to.not.match(/^EnvironmentFile=/m);
    });

    it("runs the unit's command line with a config file, and the file decides: address, cluster address, data dir, node name", async function () {
      this.timeout(60_000);
      const unit = fs.readFileSync(path.join(ROOT, 'deploy/hostd.service'), 'utf8');
      const exec = /^ExecStart=(.+)$/m.exec(unit)![1].split(/\s+/);
      const env = Object.fromEntries(
        unit
          .split('\n')
          .filter((l) => l.startsWith('Environment='))
          .map((l) => l.slice('Environment='.length).split('=') as [string, string]),
      );
      const workdir = /^WorkingDirectory=(.+)$/m.exec(unit)![1];
      // The installed paths, mapped onto this checkout and a scratch /etc (as deploy/install.sh does).
      const etc = tempDir('hostd-unit-etc-');
      const data = tempDir('hostd-unit-data-');
      const cfgPath = path.join(etc, 'config.yaml');
      const map = (s: string) =>
        s.replace('/usr/local/bin/hostd', path.join(ROOT, 'bin/hostd.js')).replace('/etc/hostd/config.yaml', cfgPath).replace('/opt/hostd', ROOT);
      const argv = exec.map(map);
      const childEnv: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin' };
      for (const [k, v] of Object.entries(env)) childEnv[k] = map(v);
      let proc!: ChildProcessByStdio<null, Readable, Readable>;
      let stderr = '';
      let port = 0;
      let cport = 0;
      /** Starts the unit's command on these ports; rejects (naming the cause) when it exits or does not listen. */
      const start = async ([p, cp]: number[]) => {
        [port, cport] = [p, cp];
        fs.writeFileSync(
          cfgPath,
          ['node_name: unit-node', `data_dir: ${data}`, `http_addr: 127.0.0.1:${port}`, `cluster_addr: 127.0.0.1:${cport}`, 'log_level: info', ''].join('\n'),
        );
        proc = spawn(argv[0], argv.slice(1), { cwd: map(workdir), env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
        stderr = '';
        proc.stderr.on('data', (c) => (stderr += c));
        return new Promise<any>((resolve, reject) => {
          const t = setTimeout(() => reject(new Error(`did not start: ${stderr}`)), 45_000);
          readline.createInterface({ input: proc.stdout }).on('line', (line) => {
            try {
              const rec = JSON.parse(line);
              if (rec.msg === 'hostd listening') {
                clearTimeout(t);
                resolve(rec);
              }
            } catch {
              /* not JSON */
            }
          });
          proc.once('exit', (c) => {
            clearTimeout(t);
            reject(new Error(`exited ${c}: ${stderr}`));
          });
        });
      };
      try {
        // The config names the ports: ones that were free, others if something took them meanwhile.
        const listening = await onFreePorts(2, start);
        expect(listening.http).to.equal(`http://127.0.0.1:${port}`);
        expect(listening.cluster).to.equal(`127.0.0.1:${cport}`);
        expect(listening.socket).to.equal(path.join(data, 'hostd.sock'));
        // hostctl finds it through the same file, from anywhere.
        const ctl = await runIn('/', path.join(ROOT, 'bin/hostctl.js'), ['call', 'peers_list'], { HOSTD_CONFIG: cfgPath });
        expect(ctl.code, ctl.stderr).to.equal(0);
        expect(JSON.parse(ctl.stdout).peers[0]).to.include({ name: 'unit-node', is_self: true });
      } finally {
        if (proc.exitCode === null && proc.signalCode === null) {
          const exited = new Promise((r) => proc.once('exit', r));
          proc.kill('SIGTERM');
          await exited;
        }
      }
      expect(proc.exitCode, stderr).to.equal(0);
    });

    it('a port in use names the setting to change and where it came from', async function () {
      this.timeout(60_000);
      const etc = tempDir('hostd-busy-etc-');
      const cfgPath = path.join(etc, 'config.yaml');
      const busy = d.url.replace('http://', '');
      fs.writeFileSync(cfgPath, `data_dir: ${tempDir('hostd-busy-data-')}\nhttp_addr: ${busy}\ncluster_addr: 127.0.0.1:0\n`);
      const fromFile = await runIn(outside, path.join(ROOT, 'bin/hostd.js'), [], { HOSTD_CONFIG: cfgPath });
      expect(fromFile.code).to.equal(1);
      expect(fromFile.stderr).to.contain(`hostd: cannot listen for the API on ${busy}: the address is in use (change http_addr in ${cfgPath})`);
      const fromEnv = await runIn(outside, path.join(ROOT, 'bin/hostd.js'), [], { HOSTD_CONFIG: cfgPath, HOSTD_HTTP_ADDR: busy });
      expect(fromEnv.stderr).to.contain(`the address is in use (change HOSTD_HTTP_ADDR)`);
    });
  });
});
