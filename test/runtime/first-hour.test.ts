/**
 * docs/first-hour.md, run as written: the page's marked shell blocks, one
 * `bash -euo pipefail` per domain, against a real daemon started here, with
 * a `hostctl` on PATH that runs this checkout's bin/hostctl.js and finds the
 * daemon through HOSTD_DATA_DIR. Each domain asserts what the page's output
 * shows and that nothing the page made is left; everything the test made
 * (daemon, containers, engine, guests, background processes of a block) is
 * removed also when a block fails.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { ROOT, eventually, freePort, startDaemon, tempDir, type CommandResult, type TestDaemon } from '../helpers/daemon.js';
import { firstHourScript, pageBlocks } from '../helpers/first-hour-doc.js';
import { requireOrSkip, requireRuntime } from '../helpers/runtime-gate.js';
import { killContainers, removeCgroupGroup, requireLxc } from '../helpers/lxc-env.js';
import { appsRuntime, missingRuntime as appsMissing, startEngine, type TestEngine } from '../helpers/apps-engine.js';
import { COMPOSE } from '../../daemon/apps/driver.js';
import { proxyAvailability } from '../helpers/proxy-node.js';
import { killGuests, qemuGuests, requireVmsRuntime, startVmsDaemon, type VmsEnv } from '../helpers/vms-fixture.js';
import { importImages } from '../helpers/sandboxes-fixture.js';
import { guestImage } from '../helpers/vms-guest.js';

const PAGE = fs.readFileSync(path.join(ROOT, 'docs/first-hour.md'), 'utf8');

/** A directory with `hostctl`: this checkout's bin/hostctl.js, as `npm link` would put it on PATH. */
function hostctlShim(): string {
  const dir = tempDir('hostd-first-hour-bin-');
  fs.writeFileSync(path.join(dir, 'hostctl'), `#!/bin/sh\nexec '${process.execPath}' '${path.join(ROOT, 'bin/hostctl.js')}' "$@"\n`, { mode: 0o755 });
  return dir;
}

/** Why the page's own tools are missing, or null. */
function toolsMissing(): string | null {
  for (const p of ['jq', 'curl', 'bash']) {
    if (!(process.env.PATH ?? '').split(':').some((d) => d && fs.existsSync(path.join(d, p))))
      return `${p} is not installed (deploy/install-deps.sh installs it)`;
  }
  return null;
}

/**
 * Runs the page's blocks of `domain` in a fresh working directory as one
 * bash script (own process group, killed when it ends, so a server a block
 * left in the background goes too). hostctl reaches `d` through
 * HOSTD_DATA_DIR; HOSTD_URL/HOSTD_TOKEN of the test's environment never
 * reach it.
 */
async function runPage(
  domain: string,
  d: TestDaemon | null,
  opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<CommandResult> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !/^HOSTD_/.test(k)) env[k] = v;
  Object.assign(env, { PATH: `${hostctlShim()}:${process.env.PATH}`, HOSTD_CONFIG: '', ...(d ? { HOSTD_DATA_DIR: d.dataDir } : {}), ...(opts.env ?? {}) });
  const cwd = opts.cwd ?? tempDir('hostd-first-hour-');
  const script = firstHourScript(PAGE, domain);
  return new Promise((resolve) => {
    const c = spawn('bash', ['-euo', 'pipefail', '-c', script], { cwd, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    c.stdout!.on('data', (b) => (stdout += b.toString()));
    c.stderr!.on('data', (b) => (stderr += b.toString()));
    const killGroup = () => {
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        /* already gone */
      }
    };
    const timer = setTimeout(() => {
      stderr += `\n[first-hour test: the ${domain} blocks did not end within ${opts.timeoutMs ?? 300_000} ms]`;
      killGroup();
    }, opts.timeoutMs ?? 300_000);
    c.once('exit', (code) => {
      clearTimeout(timer);
      killGroup();
      resolve({ code: code ?? 1, stdout, stderr });
    });
  });
}

/** The block run's exit status 0, with its output in the failure message. */
function expectOk(r: CommandResult, more = ''): void {
  expect(r.code, `exit ${r.code}\n--- stdout\n${r.stdout}\n--- stderr\n${r.stderr}${more}`).to.equal(0);
}

/** The last lines of each running guest's serial console under a VM daemon's root: what a guest that never became ready printed. */
function guestConsoles(root: string): string {
  const run = path.join(root, 'data', 'run');
  if (!fs.existsSync(run)) return '';
  return fs
    .readdirSync(run)
    .filter((d) => fs.existsSync(path.join(run, d, 'serial.log')))
    .map(
      (d) =>
        `\n--- ${d} serial console (last 40 lines)\n${fs
          .readFileSync(path.join(run, d, 'serial.log'), 'utf8')
          .split('\n')
          .slice(-40)
          .join('\n')}`,
    )
    .join('');
}

describe('docs/first-hour.md, every command run', function () {
  this.timeout(600_000);

  it('marks only blocks this file runs, every mark spelled so that it is found', function () {
    // A misspelt mark would leave its block unrun, and the page untested there.
    const marks = PAGE.split('\n').filter((l) => l.trimStart().startsWith('<!--') && l.includes('first-hour'));
    const blocks = pageBlocks(PAGE);
    expect(blocks.length, 'every mark line is a mark').to.equal(marks.length);
    expect([...new Set(blocks.flatMap((b) => b.names))].sort()).to.deep.equal(['apps', 'folders', 'lxc', 'proxy', 'proxy-config', 'sandboxes', 'vms']);
  });

  it('folders: make one, put a file in it, list it', async function () {
    requireOrSkip(this, 'folders', toolsMissing());
    const d = await startDaemon();
    try {
      const r = await runPage('folders', d);
      expectOk(r);
      expect(r.stdout.split('\n')).to.include('hello.txt');
      const left = await d.admin.request('GET', '/api/v1/folders');
      expect(left.status).to.equal(200);
      expect(left.body.folders.map((f: { name: string }) => f.name)).to.not.include('first-hour');
    } finally {
      await d.stop();
    }
  });

  it('lxc: a rootfs from busybox-static, image import, create, start, exec, stop, delete', async function () {
    await requireLxc(this);
    requireOrSkip(this, 'lxc', toolsMissing());
    const d = await startDaemon();
    try {
      const r = await runPage('lxc', d);
      expectOk(r);
      // The exec's output: the hostname hostd wrote for the container.
      expect(r.stdout.split('\n')).to.include('first-hour');
      expect((await d.admin.request('GET', '/api/v1/lxc')).body.containers).to.deep.equal([]);
      expect((await d.admin.request('GET', '/api/v1/lxc/images')).body.images).to.deep.equal([]);
    } finally {
      killContainers(d.dataDir);
      await d.stop();
      removeCgroupGroup(d.dataDir);
    }
  });

  it('apps: docker import of the rootfs, a custom compose app, list, logs, stop, uninstall', async function () {
    await requireRuntime(this, 'apps', appsRuntime(), { need: [COMPOSE], also: appsMissing });
    requireOrSkip(this, 'apps', toolsMissing());
    // The page's `docker` and the daemon both reach a private engine (DOCKER_HOST), never the host's.
    const engine: TestEngine = await startEngine();
    let d: TestDaemon | undefined;
    try {
      d = await startDaemon({ env: { DOCKER_HOST: engine.host } });
      const r = await runPage('apps', d, { env: { DOCKER_HOST: engine.host } });
      expectOk(r);
      expect(r.stdout).to.include('hello from the first hour');
      expect((await d.admin.request('GET', '/api/v1/apps')).body.apps).to.deep.equal([]);
      const images = await engine.docker(['images', '-q', 'local/busybox:1']);
      expect(images.stdout.trim(), 'the imported image is removed').to.equal('');
    } finally {
      await d?.stop();
      await engine.stop();
    }
  });

  it('proxy: an internal-CA entry to a loopback upstream, fetched with curl --cacert --resolve', async function () {
    await requireRuntime(this, 'proxy', proxyAvailability);
    requireOrSkip(this, 'proxy', toolsMissing());
    const work = tempDir('hostd-first-hour-');
    expectOk(await runPage('proxy-config', null, { cwd: work }));
    const d = await startDaemon({ configYaml: fs.readFileSync(path.join(work, 'first-hour.yaml'), 'utf8') });
    try {
      const https = await freePort();
      let upstream = await freePort();
      while (upstream === https) upstream = await freePort();
      const r = await runPage('proxy', d, { cwd: work, env: { HTTPS_PORT: String(https), UPSTREAM_PORT: String(upstream) } });
      expectOk(r);
      expect(r.stdout.split('\n')).to.include('hello through the proxy');
      const cfg = await d.admin.request('GET', '/api/v1/proxy/config');
      expect(cfg.body.config.enabled).to.equal(false);
      expect(cfg.body.config.domains).to.deep.equal([]);
    } finally {
      await d.stop();
    }
  });

  describe('VMs and sandboxes (their two boots side by side)', function () {
    let e: VmsEnv | undefined;
    /**
     * The sandbox section's run, started by the VM test as soon as the VM
     * section's image import has finished: the two cold boots (the VM's, the
     * sandbox's) then run at the same time, two guests at most, instead of
     * one after the other.
     */
    let sandboxRun: Promise<CommandResult> | undefined;
    const runSandboxes = () => runPage('sandboxes', e!.d, { env: { API_URL: e!.d.url }, timeoutMs: 1_200_000 });

    before(async function () {
      await requireVmsRuntime(this);
      requireOrSkip(this, 'vms', toolsMissing());
      // Restricted user networking: the guests reach nothing but the host's forwards.
      e = await startVmsDaemon({ extraYaml: 'sandboxes:\n  warm_scan_seconds: 0' });
    });
    after(async () => {
      // A sandbox run still under way (the VM test failed first) ends before its guests are killed.
      await sandboxRun?.catch(() => undefined);
      if (!e) return;
      await killGuests(e.root);
      await e.d.stop();
    });

    it('vms: image import, create, start, wait-ready, exec, stop --force, delete (one boot)', async function () {
      this.timeout(1_500_000);
      // The cached test guest: the page's `${IMAGE:-$(node dist/test/helpers/vms-guest.js)}` then skips the build.
      const vmsRun = runPage('vms', e!.d, { env: { IMAGE: await guestImage() }, timeoutMs: 1_200_000 });
      let vmsEnded = false;
      void vmsRun.finally(() => (vmsEnded = true));
      // The image is listed once its import has put it in place: the sandbox section then has its image.
      const imported = await eventually(
        async () => {
          const images = (await e!.d.admin.request('GET', '/api/v1/vms/images')).body.images as Array<{ image_id: string }>;
          const done = images.some((i) => i.image_id === 'deb12');
          return done || vmsEnded ? { done } : undefined;
        },
        1_200_000,
        "the VM section's image import",
      );
      if (imported.done) sandboxRun = runSandboxes();
      const r = await vmsRun;
      // A guest that never answered (seen once beside a CPU hog): its console says how far its boot got.
      expectOk(r, r.code === 0 ? '' : guestConsoles(e!.root));
      expect(
        r.stdout.split('\n').some((l) => /^12\.\d+$/.test(l)),
        `the exec printed /etc/debian_version\n${r.stdout}`,
      ).to.equal(true);
      expect((await e!.d.admin.request('GET', '/api/v1/vms')).body.vms).to.deep.equal([]);
      // The sandbox section may still run its guest: any QEMU left is a sandbox's (a sandbox's VM is recorded before it starts).
      const guests = qemuGuests(e!.root).map((g) => g.vm);
      const sandboxVms = ((await e!.d.admin.request('GET', '/admin/sandboxes')).body.sandboxes as Array<{ vmid: number | null }>).map((x) => `vm-${x.vmid}`);
      expect(
        guests.filter((g) => !sandboxVms.includes(g)),
        'no guest of the VM section left running',
      ).to.deep.equal([]);
    });

    it('sandboxes: a token with sandbox.manage, create, wait, exec, delete (one cold boot)', async function () {
      this.timeout(1_500_000);
      // The page takes the image from the VM section, whose test started this run beside its own; alone
      // (mocha --grep) the test imports the image the same way and runs the section itself.
      if (!sandboxRun) {
        const images = (await e!.d.admin.request('GET', '/api/v1/vms/images')).body.images as Array<{ image_id: string }>;
        if (!images.some((i) => i.image_id === 'deb12')) await importImages(e!, 'deb12', false, 'full');
      }
      const r = await (sandboxRun ??= runSandboxes());
      expectOk(r);
      expect(r.stdout.split('\n'), r.stdout + r.stderr).to.include('hello from first-hour');
      const list = await e!.d.admin.request('GET', '/admin/sandboxes');
      expect(list.body.sandboxes.filter((s: { state: string }) => s.state !== 'destroyed')).to.deep.equal([]);
      const tokens = await e!.d.admin.request('GET', '/api/v1/tokens');
      expect(tokens.body.tokens.map((t: { name: string }) => t.name)).to.not.include('first-hour-agent');
      // Only this section's guests: a VM of the VM section (listed by /vms; a sandbox's VM is not) that a failed
      // VM test left running is that test's failure, and the after hook's to kill.
      const vmSection = ((await e!.d.admin.request('GET', '/api/v1/vms')).body.vms as Array<{ vmid: number }>).map((v) => `vm-${v.vmid}`);
      expect(
        qemuGuests(e!.root).filter((g) => !vmSection.includes(g.vm)),
        'no sandbox guest left running',
      ).to.deep.equal([]);
    });
  });
});
