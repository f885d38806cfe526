/**
 * System domain against the real host: figures must match what the kernel
 * reports, allocation must sum what the guest domains report, and the status rules
 * are checked with made-up numbers.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SystemContext, type GuestLoad, type SystemContextOptions } from '../../daemon/system/context.js';
import { assessHealth, health, type HealthInput } from '../../daemon/system/health.js';
import { allocation } from '../../daemon/system/allocation.js';
import { systemHandlers } from '../../daemon/system/handlers.js';
import { ProcfsProbe } from '../../daemon/system/procfs/index.js';
import { diskUsedPercent } from '../../daemon/system/views.js';
import type { PoolConfig } from '../../daemon/config.js';
import { CpuSampler, cpuUsageBetween, parseMeminfo, parseProcStat } from '../../daemon/system/procfs/probe.js';
import type { CallContext } from '../../daemon/lib/caller.js';

const hasProc = fs.existsSync('/proc/meminfo') && fs.existsSync('/proc/stat');
const MiB = 1024 * 1024;

async function statfsFigures(dir: string) {
  const s = await fs.promises.statfs(dir, { bigint: true });
  return { total: Number(s.blocks * s.bsize), available: Number(s.bavail * s.bsize) };
}

/** The domain as its module opens it: a context over the procfs probe, and its two operations. */
function systemOf(pools: PoolConfig[], opts: SystemContextOptions & { sampleIntervalMs?: number }) {
  const probe = new ProcfsProbe(opts.sampleIntervalMs);
  const c = new SystemContext(pools, probe, opts);
  return { c, sampler: probe.sampler, start: () => probe.start(), stop: () => probe.stop(), health: () => health(c), allocation: () => allocation(c) };
}
type System = ReturnType<typeof systemOf>;

const ctx: CallContext = {
  caller: { tokenId: 't1', tokenName: 'test', scopes: ['system.read'], transport: 'api', origin: 'node-1' },
  requestId: 'r1',
  note() {},
};

describe('system service (real host)', function () {
  let tmp: string;
  let poolDir: string;
  let svc: System;
  const guests: GuestLoad[] = [];

  before(async () => {
    tmp = await fs.promises.mkdtemp(path.join(os.tmpdir(), 'hostd-system-'));
    poolDir = path.join(tmp, 'pool');
    await fs.promises.mkdir(poolDir);
    svc = systemOf([{ id: 'default', path: poolDir }], { nodeId: 'node-1', nodeName: 'alpha', sampleIntervalMs: 50, guests: async () => guests });
    svc.start();
  });

  after(async () => {
    svc?.stop();
    if (tmp) await fs.promises.rm(tmp, { recursive: true, force: true });
  });

  describe('health', () => {
    it('reports the node and the host CPU', async () => {
      // The load average moves while the health is read (another process may start beside the suite):
      // the answer lies between what the kernel said just before and just after, to its two decimals.
      const before = os.loadavg();
      const h = await svc.health();
      const after = os.loadavg();
      expect(h.node).to.deep.equal({ id: 'node-1', name: 'alpha' });
      expect(h.cpu.cores).to.equal(os.cpus().length);
      expect(h.cpu.model).to.equal(os.cpus()[0]!.model.trim());
      expect(h.cpu.usage_percent).to.be.a('number').within(0, 100);
      expect(h.cpu.load).to.have.length(3);
      h.cpu.load.forEach((l, i) => expect(l).to.be.within(Math.min(before[i]!, after[i]!) - 0.01, Math.max(before[i]!, after[i]!) + 0.01));
      expect(['ok', 'degraded', 'critical']).to.include(h.status);
      expect(Date.parse(h.checked_at)).to.be.closeTo(Date.now(), 5000);
    });

    it('reports memory as /proc/meminfo has it', async function () {
      const h = await svc.health();
      const text = await fs.promises.readFile('/proc/meminfo', 'utf8');
      const totalKb = Number(/^MemTotal:\s+(\d+)/m.exec(text)![1]);
      expect(h.memory.total_bytes).to.equal(totalKb * 1024);
      expect(h.memory.available_bytes).to.be.greaterThan(0).and.at.most(h.memory.total_bytes);
      // Available memory moves a little between two reads; allow 256 MiB.
      const availKb = Number(/^MemAvailable:\s+(\d+)/m.exec(text)![1]);
      expect(h.memory.available_bytes).to.be.closeTo(availKb * 1024, 256 * MiB);
      const expectedUsed = ((h.memory.total_bytes - h.memory.available_bytes) / h.memory.total_bytes) * 100;
      expect(h.memory.used_percent).to.be.closeTo(expectedUsed, 0.01);
    });

    it('reports host uptime', async () => {
      const h = await svc.health();
      expect(Number.isInteger(h.uptime_seconds)).to.equal(true);
      expect(h.uptime_seconds).to.be.closeTo(os.uptime(), 5);
    });

    it('reports pool disk figures as statfs has them', async () => {
      const h = await svc.health();
      expect(h.pools).to.have.length(1);
      const p = h.pools[0]!;
      const s = await statfsFigures(poolDir);
      expect(p.storage_id).to.equal('default');
      expect(p.path).to.equal(poolDir);
      expect(p.total_bytes).to.equal(s.total);
      expect(p.available_bytes).to.be.closeTo(s.available, 64 * MiB);
      expect(p.used_percent).to.be.a('number').within(0, 100);
      expect(p.error).to.equal(undefined);
    });

    it('takes CPU usage from the background sampler once it has a figure', async () => {
      expect(svc.sampler.running).to.equal(true);
      const s = systemOf([], { nodeId: 'n', nodeName: 'n', sampleIntervalMs: 1000 });
      s.start();
      try {
        const deadline = Date.now() + 5000;
        while (s.sampler.usagePercent === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
        const before = s.sampler.usagePercent;
        expect(before).to.be.a('number');
        const h = await s.health();
        expect([before, s.sampler.usagePercent]).to.include(h.cpu.usage_percent);
      } finally {
        s.stop();
      }
      expect(s.sampler.running).to.equal(false);
    });

    it('measures CPU on demand when the sampler is stopped', async () => {
      const s = systemOf([], { nodeId: 'n', nodeName: 'n' });
      expect(s.sampler.running).to.equal(false);
      const h = await s.health();
      expect(h.cpu.usage_percent).to.be.within(0, 100);
      expect(h.pools).to.deep.equal([]);
    });

    it('reports an unreadable pool without failing, and is degraded for it', async () => {
      const missing = path.join(tmp, 'no-such-pool');
      const s = systemOf([{ id: 'gone', path: missing }], { nodeId: 'n', nodeName: 'n' });
      const h = await s.health();
      expect(h.pools[0]).to.deep.include({ storage_id: 'gone', path: missing, total_bytes: null, available_bytes: null, used_percent: null });
      expect(h.pools[0]!.error).to.match(/does not exist/);
      expect(h.status).to.not.equal('ok');
      expect(h.reasons.some((r) => r.includes('gone'))).to.equal(true);
    });
  });

  describe('allocation', () => {
    before(() => {
      // What the VM, LXC and sandbox domains report (destroyed sandboxes are not guests).
      guests.push(
        { kind: 'vm', cpu_cores: 2, memory_mb: 2048, running: true },
        { kind: 'vm', cpu_cores: 4, memory_mb: 4096, running: false },
        { kind: 'vm', cpu_cores: 0, memory_mb: 0, running: false }, // half-made: counted, holds nothing
        { kind: 'lxc', cpu_cores: 1, memory_mb: 512, running: true },
        { kind: 'lxc', cpu_cores: 2, memory_mb: 1024, running: false },
        { kind: 'sandbox', cpu_cores: 1, memory_mb: 1024, running: true },
        { kind: 'sandbox', cpu_cores: 0, memory_mb: 0, running: false }, // suspended, no resources recorded
        { kind: 'app', cpu_cores: 3, memory_mb: 3000, running: true }, // apps reserve nothing
      );
    });

    it('sums what VMs, sandboxes and containers hold against capacity', async () => {
      const a = await svc.allocation();
      const text = hasProc ? await fs.promises.readFile('/proc/meminfo', 'utf8') : '';
      const totalBytes = hasProc ? Number(/^MemTotal:\s+(\d+)/m.exec(text)![1]) * 1024 : os.totalmem();
      expect(a.capacity).to.deep.equal({ cpu_cores: os.cpus().length, memory_mb: Math.floor(totalBytes / MiB) });

      // VMs 101+102+103, sandboxes sb-a+sb-b; containers 200+201.
      expect(a.allocated.vms).to.deep.equal({ count: 5, running: 2 });
      expect(a.allocated.containers).to.deep.equal({ count: 2, running: 1 });
      expect(a.allocated.cpu_cores).to.equal(2 + 4 + 1 + 1 + 2);
      expect(a.allocated.memory_mb).to.equal(2048 + 4096 + 1024 + 512 + 1024);
      expect(a.running).to.deep.equal({ cpu_cores: 2 + 1 + 1, memory_mb: 2048 + 1024 + 512 });

      expect(a.ratio.cpu).to.be.closeTo(10 / a.capacity.cpu_cores, 1e-4);
      expect(a.ratio.memory).to.be.closeTo(8704 / a.capacity.memory_mb, 1e-4);

      const s = await statfsFigures(poolDir);
      expect(a.pools).to.have.length(1);
      expect(a.pools[0]!.total_bytes).to.equal(s.total);
    });

    it('is served by the handlers', async () => {
      const h = systemHandlers(svc.c);
      const alloc = (await h.system_allocation({}, ctx)) as Awaited<ReturnType<System['allocation']>>;
      expect(alloc.allocated.vms.count).to.equal(5);
      const health = (await h.system_health({}, ctx)) as Awaited<ReturnType<System['health']>>;
      expect(health.node.id).to.equal('node-1');
      expect(health.cpu.cores).to.equal(os.cpus().length);
    });
  });
});

describe('system status rules', () => {
  const GiB = 1024 * MiB;
  const base = (over: Partial<HealthInput> = {}): HealthInput => ({
    memory: { total_bytes: 100 * GiB, available_bytes: 50 * GiB },
    pools: [{ storage_id: 'p', used_percent: 40 }],
    load1: 1,
    cores: 4,
    ...over,
  });
  const mem = (availPct: number) => ({ total_bytes: 100 * GiB, available_bytes: availPct * GiB });

  it('is ok with room everywhere', () => {
    expect(assessHealth(base())).to.deep.equal({ status: 'ok', reasons: [] });
  });

  it('applies the memory thresholds', () => {
    expect(assessHealth(base({ memory: mem(10) })).status).to.equal('ok');
    expect(assessHealth(base({ memory: mem(9.9) })).status).to.equal('degraded');
    expect(assessHealth(base({ memory: mem(5) })).status).to.equal('degraded');
    expect(assessHealth(base({ memory: mem(4.9) })).status).to.equal('critical');
    expect(assessHealth(base({ memory: { total_bytes: 0, available_bytes: 0 } })).status).to.equal('ok');
  });

  it('applies the pool thresholds', () => {
    const pools = (u: number | null) => [
      { storage_id: 'a', used_percent: 10 },
      { storage_id: 'b', used_percent: u },
    ];
    expect(assessHealth(base({ pools: pools(90) })).status).to.equal('ok');
    expect(assessHealth(base({ pools: pools(90.01) })).status).to.equal('degraded');
    expect(assessHealth(base({ pools: pools(98) })).status).to.equal('degraded');
    const crit = assessHealth(base({ pools: pools(98.5) }));
    expect(crit.status).to.equal('critical');
    expect(crit.reasons.join(' ')).to.include('pool b');
    expect(assessHealth(base({ pools: pools(null) })).status).to.equal('degraded');
  });

  it('is degraded when the 1-minute load is over twice the cores', () => {
    expect(assessHealth(base({ load1: 8, cores: 4 })).status).to.equal('ok');
    expect(assessHealth(base({ load1: 8.01, cores: 4 })).status).to.equal('degraded');
  });

  it('lets critical win and lists every reason', () => {
    const r = assessHealth(base({ memory: mem(3), pools: [{ storage_id: 'p', used_percent: 95 }], load1: 100, cores: 4 }));
    expect(r.status).to.equal('critical');
    expect(r.reasons).to.have.length(3);
  });
});

describe('system probe parsers', () => {
  it('parses the aggregate line of /proc/stat', () => {
    const text = 'cpu  100 5 50 800 20 3 2 10 7 0\ncpu0 50 2 25 400 10 1 1 5 3 0\nintr 1 2 3\n';
    expect(parseProcStat(text)).to.deep.equal({ total: 100 + 5 + 50 + 800 + 20 + 3 + 2 + 10, idle: 820 });
    expect(parseProcStat('intr 1 2\n')).to.equal(null);
  });

  it('computes usage between two samples', () => {
    expect(cpuUsageBetween({ total: 1000, idle: 800 }, { total: 2000, idle: 1550 })).to.equal(25);
    expect(cpuUsageBetween({ total: 1000, idle: 800 }, { total: 1000, idle: 800 })).to.equal(0);
  });

  it('parses /proc/meminfo, with and without MemAvailable', () => {
    const withAvail = 'MemTotal:       16000 kB\nMemFree:         1000 kB\nMemAvailable:    6000 kB\nActive(anon):     10 kB\nHugePages_Total:       0\n';
    expect(parseMeminfo(withAvail)).to.deep.equal({ total_bytes: 16000 * 1024, available_bytes: 6000 * 1024 });
    const old = 'MemTotal: 16000 kB\nMemFree: 1000 kB\nBuffers: 500 kB\nCached: 2500 kB\n';
    expect(parseMeminfo(old)).to.deep.equal({ total_bytes: 16000 * 1024, available_bytes: 4000 * 1024 });
    expect(parseMeminfo('nothing here')).to.equal(null);
  });

  it('reports disk use as df does', () => {
    // 100 total, 20 free of which 10 are reserved: used 80 of 90 usable.
    expect(diskUsedPercent({ total_bytes: 100, free_bytes: 20, available_bytes: 10 })).to.be.closeTo(88.89, 0.01);
    expect(diskUsedPercent({ total_bytes: 0, free_bytes: 0, available_bytes: 0 })).to.equal(0);
  });

  it("runs a stoppable, unref'd background sampler", async () => {
    const s = new CpuSampler(20).start();
    try {
      expect(s.running).to.equal(true);
      const deadline = Date.now() + 2000;
      while (s.usagePercent === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(s.usagePercent).to.be.a('number').within(0, 100);
      expect(s.sampledAt).to.be.a('number');
    } finally {
      s.stop();
    }
    expect(s.running).to.equal(false);
    const last = s.sampledAt;
    await new Promise((r) => setTimeout(r, 80));
    expect(s.sampledAt).to.equal(last);
  });
});
