/**
 * The VM and sandbox figures of the metrics endpoint against real QEMU (TCG
 * here), on the shared sandbox daemon (test/helpers/sandboxes-fixture.ts):
 * a sandbox resumed from its warm state and one booted cold land in
 * hostd_sandbox_start_seconds by method (and the resume in
 * hostd_vm_warm_resume_seconds) without its id, owner or VM ever showing in
 * a series; then one VM of /vms gives its per-VM series (state, name, CPU
 * seconds that grow under a busy loop, memory, disk bytes that grow with a
 * write and a read in the guest), only to a token that also holds vm.read.
 * One guest at a time; the after hook deletes the VM, destroys the
 * sandboxes and revokes the tokens, also when a test failed.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { api, ok, requireVmsRuntime, untilReady, type VmsEnv } from '../../helpers/vms-fixture.js';
import { eventually } from '../../helpers/daemon.js';
import { API, raw } from '../../helpers/conformance.js';
import { sample } from '../../helpers/metrics.js';
import { leaseSharedSandboxes, okAs, untilRunning, type SandboxLease } from '../../helpers/sandboxes-fixture.js';
import { promtool } from '../../integration/metrics/promtool.js';

const EVERY_READ = ['system.read', 'vm.read', 'lxc.read', 'apps.read', 'proxy.read', 'sandbox.read'];
/** Longer than the scrape cache (5 s): the next scrape reads the runtime again. */
const BOOT_S = 600;

describe('metrics runtime: VM figures, sandbox start and warm-resume latency (QEMU)', function () {
  this.timeout(30 * 60_000);
  let e: VmsEnv;
  let lease: SandboxLease | undefined;
  let owner = '';
  let scraper = '';
  let systemOnly = '';
  const ownerName = `metrics-owner-${crypto.randomBytes(3).toString('hex')}`;
  let vmid: number | null = null;

  before(async function () {
    await requireVmsRuntime(this, 'sandboxes');
    lease = await leaseSharedSandboxes({
      [ownerName]: ['sandbox.read', 'sandbox.manage'],
      'metrics-scraper': EVERY_READ,
      'metrics-system': ['system.read'],
    });
    ({ e } = lease);
    owner = lease.tokens[ownerName];
    scraper = lease.tokens['metrics-scraper'];
    systemOnly = lease.tokens['metrics-system'];
  });

  after(async function () {
    if (vmid !== null && lease) {
      await api(e, 'POST', `/vms/${vmid}/stop`, { force: true });
      const d = await api(e, 'DELETE', `/vms/${vmid}`);
      expect(d.status, d.text).to.equal(200);
    }
    await lease?.release();
  });

  const scrape = async (token: string, accept?: string) => {
    const r = await raw(e.d.url, 'GET', `${API}/metrics`, { token, headers: accept ? { accept } : {} });
    expect(r.status, r.text).to.equal(200);
    return r.text;
  };
  const starts = (t: string, method: string) => ({
    count: sample(t, 'hostd_sandbox_start_seconds_count', { method }),
    sum: sample(t, 'hostd_sandbox_start_seconds_sum', { method }),
  });
  const resumes = (t: string) => ({ count: sample(t, 'hostd_vm_warm_resume_seconds_count'), sum: sample(t, 'hostd_vm_warm_resume_seconds_sum') });

  /** The sandbox's id, name, owner and VM appear in no series of any exposition, whatever the token holds. */
  const neverShown = async (sb: { id: string; name: string; vmid: number }) => {
    for (const [token, accept] of [
      [scraper, undefined],
      [scraper, 'application/openmetrics-text; version=1.0.0'],
      [systemOnly, undefined],
    ] as const) {
      const t = await scrape(token, accept);
      for (const secret of [sb.id, sb.name, ownerName]) expect(t, `${secret} in the exposition`).to.not.include(secret);
      expect(t).to.not.match(new RegExp(`^hostd_vm_\\w+\\{[^}]*id="${sb.vmid}"`, 'm'));
    }
  };

  it('a warm start lands in hostd_sandbox_start_seconds{method="warm"} and hostd_vm_warm_resume_seconds; the sandbox and its VM in no series', async () => {
    const t0 = await scrape(scraper);
    const before = { warm: starts(t0, 'warm'), cold: starts(t0, 'cold'), resume: resumes(t0) };
    // Both methods are there from the start (0), so that a dashboard shows the one not used yet.
    expect(before.warm.count).to.be.a('number');
    expect(before.cold.count).to.be.a('number');
    expect(before.resume.count).to.be.a('number');

    const name = `metered-warm-${crypto.randomBytes(3).toString('hex')}`;
    const c = await okAs(e, owner, 'POST', '/sandboxes', { image_id: 'deb12', name }, 201);
    const sb = await untilRunning(e, owner, c.sandbox.id, BOOT_S);
    expect(sb.start).to.include({ method: 'warm', warm_state_id: lease!.warmId });

    const t1 = await scrape(scraper);
    const warm = starts(t1, 'warm');
    expect(warm.count).to.equal(before.warm.count! + 1);
    // What is observed is the start time the sandbox shows (create call to running).
    expect(warm.sum! - before.warm.sum!).to.be.closeTo(sb.start.ms / 1000, 0.0005);
    expect(starts(t1, 'cold').count, 'no cold start').to.equal(before.cold.count);
    const resume = resumes(t1);
    expect(resume.count).to.equal(before.resume.count! + 1);
    expect(resume.sum! - before.resume.sum!).to.be.greaterThan(0);
    expect(resume.sum! - before.resume.sum!, 'the resume is part of the start').to.be.at.most(sb.start.ms / 1000);
    // The counts by state are read on scrape through a short cache: a scrape taken before it expires may not count this one yet.
    await eventually(async () => (sample(await scrape(scraper), 'hostd_sandboxes', { state: 'running' }) ?? 0) >= 1, 60_000, 'the running sandbox counted');

    await neverShown(sb);
    const check = await promtool(t1);
    expect(check.code, check.out).to.equal(0);
    await okAs(e, owner, 'DELETE', `/sandboxes/${sb.id}`);
  });

  it('a cold boot (no warm state of its shape) lands in hostd_sandbox_start_seconds{method="cold"}, not in the warm-resume histogram', async () => {
    const t0 = await scrape(scraper);
    const before = { warm: starts(t0, 'warm'), cold: starts(t0, 'cold'), resume: resumes(t0) };
    const name = `metered-cold-${crypto.randomBytes(3).toString('hex')}`;
    const c = await okAs(e, owner, 'POST', '/sandboxes', { image_id: 'deb12', name, resources: { memory_mb: 640 } }, 201);
    const sb = await untilRunning(e, owner, c.sandbox.id, BOOT_S);
    expect(sb.start.method, JSON.stringify(sb.start)).to.equal('cold');

    const t1 = await scrape(scraper);
    const cold = starts(t1, 'cold');
    expect(cold.count).to.equal(before.cold.count! + 1);
    expect(cold.sum! - before.cold.sum!).to.be.closeTo(sb.start.ms / 1000, 0.0005);
    expect(starts(t1, 'warm').count).to.equal(before.warm.count);
    expect(resumes(t1).count).to.equal(before.resume.count);
    await neverShown(sb);
    await okAs(e, owner, 'DELETE', `/sandboxes/${sb.id}`);
  });

  describe('one VM of /vms', () => {
    let name = '';
    const labels = () => ({ id: String(vmid) });
    /** A figure of the VM once a scrape read it anew (past the cache) and `ready` holds. */
    const figureWhen = (fig: string, ready: (v: number) => boolean, what: string) =>
      eventually(
        async () => {
          const v = sample(await scrape(scraper), `hostd_vm_${fig}`, labels());
          return v !== undefined && ready(v) ? v : undefined;
        },
        120_000,
        what,
      );
    const inGuest = async (command: string, timeout = 300) => {
      const r = await ok(e, 'POST', `/vms/${vmid}/exec`, { command, timeout_seconds: timeout });
      expect(r.exit_code, `${command}: ${r.stderr}`).to.equal(0);
      return r.stdout as string;
    };
    /** utime+stime of the VM's QEMU process as the kernel counts them. */
    const qemuCpuSeconds = () => {
      const pid = Number(fs.readFileSync(path.join(e.root, 'data', 'run', `vm-${vmid}`, 'qemu.pid'), 'utf8').trim());
      const f = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
      return (Number(f[11]) + Number(f[12])) / 100;
    };

    before(async () => {
      name = `metered-vm-${crypto.randomBytes(3).toString('hex')}`;
      const c = await ok(e, 'POST', '/vms', { name, image_id: 'deb12', linked_clone: true }, 201);
      vmid = c.vm.vmid as number;
      await ok(e, 'POST', `/vms/${vmid}/start`, {});
      await untilReady(e, vmid, BOOT_S);
    });

    it('serves its name, state, CPU seconds, memory and disk bytes under its id (no network figures on user-mode NAT); promtool accepts it', async () => {
      const text = await eventually(
        async () => {
          const t = await scrape(scraper);
          return (sample(t, 'hostd_vm_cpu_seconds_total', labels()) ?? 0) > 0 ? t : undefined;
        },
        60_000,
        "the VM's CPU seconds",
      );
      expect(sample(text, 'hostd_vm_info', { id: String(vmid), name })).to.equal(1);
      expect(sample(text, 'hostd_vm_state', { id: String(vmid), state: 'running' })).to.equal(1);
      expect(sample(text, 'hostd_vm_memory_bytes', labels())).to.be.greaterThan(0);
      // The guest read its root disk to boot.
      expect(sample(text, 'hostd_vm_disk_read_bytes_total', labels())).to.be.greaterThan(0);
      expect(sample(text, 'hostd_vm_disk_written_bytes_total', labels())).to.be.a('number');
      // User-mode NAT keeps no byte counters QEMU reports: left out, not 0.
      expect(sample(text, 'hostd_vm_network_received_bytes_total', labels())).to.equal(undefined);
      expect(sample(text, 'hostd_vm_network_transmitted_bytes_total', labels())).to.equal(undefined);
      expect(sample(text, 'hostd_vm_cpu_seconds_total', labels())).to.be.at.most(qemuCpuSeconds());
      const check = await promtool(text);
      expect(check.code, check.out).to.equal(0);
    });

    it('a token with system.read but not vm.read sees no hostd_vm_ family, per VM or the resume histogram', async () => {
      const text = await scrape(systemOnly);
      expect(text).to.include('# TYPE hostd_sandbox_start_seconds histogram');
      expect(text).to.not.match(/^hostd_vm_/m);
      expect(text).to.not.match(/# TYPE hostd_vm_/);
      expect(text).to.not.match(new RegExp(`id="${vmid}"`));
      expect(text).to.not.include(name);
    });

    it('CPU seconds grow with the QEMU process while the guest runs a busy loop', async () => {
      const c0 = await figureWhen('cpu_seconds_total', () => true, 'CPU seconds');
      const h0 = qemuCpuSeconds();
      // In the background (bounded in the guest too), so that the wait below is on the host's count, not the
      // guest's: a guest under TCG counts its own CPU time by its clock, which runs on while a loaded host
      // leaves QEMU waiting.
      await inGuest('timeout 900 sh -c "while :; do :; done" >/dev/null 2>&1 </dev/null & echo $! > /run/metrics-spin.pid', 60);
      try {
        await eventually(() => qemuCpuSeconds() >= h0 + 3, 600_000, "the busy loop to take 3 s of the QEMU process's CPU");
      } finally {
        await inGuest('kill "$(cat /run/metrics-spin.pid)"; rm -f /run/metrics-spin.pid', 60);
      }
      // The next scrape past the cache shows what the process used meanwhile, and never more than it used.
      const c1 = await figureWhen('cpu_seconds_total', (v) => v >= h0 + 3, "CPU seconds to show the loop's 3 s");
      expect(c1 - c0).to.be.at.least(3);
      expect(c1).to.be.at.most(qemuCpuSeconds());
    });

    it('disk bytes written grow after a write in the guest, bytes read after a read', async () => {
      const MiB = 1024 * 1024;
      const w0 = await figureWhen('disk_written_bytes_total', () => true, 'disk bytes written');
      const r0 = await figureWhen('disk_read_bytes_total', () => true, 'disk bytes read');
      await inGuest('dd if=/dev/urandom of=/var/tmp/metrics.bin bs=1M count=24 conv=fsync 2>/dev/null && sync');
      await figureWhen('disk_written_bytes_total', (v) => v >= w0 + 24 * MiB, 'disk bytes written to grow by 24 MiB');
      // Out of the guest's page cache, so that the read reaches the disk.
      await inGuest('sync; echo 3 > /proc/sys/vm/drop_caches; cat /var/tmp/metrics.bin > /dev/null; rm -f /var/tmp/metrics.bin');
      await figureWhen('disk_read_bytes_total', (v) => v >= r0 + 24 * MiB, 'disk bytes read to grow by 24 MiB');
    });
  });
});
