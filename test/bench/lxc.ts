/**
 * LXC through hostd against the same work done with the lxc-* tools directly,
 * in the same run, on the same image (the busybox test image):
 *   create  POST /api/v1/lxc             vs  lxc-create -t local (same id map and config keys)
 *   start   POST /api/v1/lxc/{id}/start  vs  lxc-start
 *   exec    POST /api/v1/lxc/{id}/exec `true` (p50)  vs  lxc-attach --clear-env -- /bin/sh -c true
 * Rounds alternate hostd and direct so that noise on a shared machine falls on
 * both. Each round starts each container BENCH_LXC_STARTS times (default 5:
 * the first start after create, then stop and start again, hostd and direct
 * in turn): one start per round made the start figure a median of five on a
 * machine where single starts vary twofold. lxc_overhead_ratio is the sum of
 * hostd's three p50s over the direct ones.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { ALL_SCOPES } from '../../api/registry/index.js';
import { hostctl, startDaemon, tempDir } from '../helpers/daemon.js';
import { busyboxImage } from '../helpers/lxc-image.js';
import { killContainers, lxcMissing, removeCgroupGroup } from '../helpers/lxc-env.js';
import { median, print } from './lib.js';

function sh(cmd: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr!.on('data', (d) => (err += d));
    c.once('error', reject);
    c.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} ${args[0]} exited ${code}: ${err.trim()}`))));
  });
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t = process.hrtime.bigint();
  await fn();
  return Number(process.hrtime.bigint() - t) / 1e6;
}

export async function lxcBench(): Promise<void> {
  const missing = lxcMissing();
  if (missing) {
    process.stdout.write(`# lxc skipped: ${missing}\n`);
    return;
  }
  const image = busyboxImage();
  const pool = tempDir('hostd-bench-lxc-pool-');
  const d = await startDaemon({ configYaml: `storage_pools:\n  - id: p1\n    path: ${pool}\nlxc:\n  stop_timeout_seconds: 10\n`, logToFile: true });
  const direct = tempDir('hostd-bench-lxc-direct-');
  try {
    const token = await d.token('bench-lxc', [...ALL_SCOPES]);
    const imp = await hostctl(d.dataDir, ['lxc', 'image', 'import', image.rootfs, '--id', 'bb']);
    if (imp.code !== 0) throw new Error(`image import failed: ${imp.stderr}`);
    const api = async (method: string, p: string, body?: unknown) => {
      const r = await d.request(method, `/api/v1${p}`, { token, body });
      if (r.status >= 300) throw new Error(`${method} ${p}: ${r.status} ${r.text}`);
      return r.body;
    };
    // The same keys hostd writes that change what LXC does (id map, limits, no network).
    const conf = path.join(direct, 'bench.conf');
    fs.writeFileSync(
      conf,
      [
        'lxc.include = /usr/share/lxc/config/common.conf',
        'lxc.idmap = u 0 100000 65536',
        'lxc.idmap = g 0 100000 65536',
        'lxc.tty.dir =',
        'lxc.cap.drop = mac_admin mac_override sys_time sys_module sys_rawio',
        'lxc.apparmor.profile = unconfined',
        'lxc.net.0.type = empty',
        'lxc.cgroup.cpu.cfs_period_us = 100000',
        'lxc.cgroup.cpu.cfs_quota_us = 100000',
        'lxc.cgroup.memory.limit_in_bytes = 536870912',
        '',
      ].join('\n'),
    );
    fs.chmodSync(direct, 0o711);

    const rounds = Number(process.env.BENCH_LXC_ROUNDS ?? 5);
    const execN = Number(process.env.BENCH_LXC_EXECS ?? 30);
    const starts = Math.max(1, Number(process.env.BENCH_LXC_STARTS ?? 5));
    const t = { create: [] as number[], start: [] as number[], exec: [] as number[], dcreate: [] as number[], dstart: [] as number[], dexec: [] as number[] };
    for (let i = 0; i < rounds; i++) {
      const name = `bench-${i}`;
      let id = 0;
      t.create.push(await timed(async () => (id = (await api('POST', '/lxc', { name, template: 'bb' })).container.lxcid)));
      t.dcreate.push(await timed(() => sh('lxc-create', ['-P', direct, '-n', name, '-f', conf, '-t', 'local', '--', '-m', image.meta, '-f', image.rootfs])));
      t.start.push(await timed(() => api('POST', `/lxc/${id}/start`)));
      t.dstart.push(await timed(() => sh('lxc-start', ['-P', direct, '-n', name])));
      for (let k = 1; k < starts; k++) {
        await api('POST', `/lxc/${id}/stop`);
        await sh('lxc-stop', ['-P', direct, '-n', name, '-k']);
        t.start.push(await timed(() => api('POST', `/lxc/${id}/start`)));
        t.dstart.push(await timed(() => sh('lxc-start', ['-P', direct, '-n', name])));
      }
      for (let k = 0; k < execN; k++) {
        t.exec.push(await timed(() => api('POST', `/lxc/${id}/exec`, { command: 'true' })));
        t.dexec.push(await timed(() => sh('lxc-attach', ['-P', direct, '-n', name, '--clear-env', '--', '/bin/sh', '-c', 'true'])));
      }
      await api('POST', `/lxc/${id}/stop`);
      await api('DELETE', `/lxc/${id}`);
      await sh('lxc-stop', ['-P', direct, '-n', name, '-k']);
      await sh('lxc-destroy', ['-P', direct, '-n', name]);
    }
    const m = Object.fromEntries(Object.entries(t).map(([k, v]) => [k, median(v)])) as Record<keyof typeof t, number>;
    print('lxc_create_ms', m.create);
    print('lxc_start_ms', m.start);
    print('lxc_exec_ms', m.exec);
    print('lxc_direct_create_ms', m.dcreate);
    print('lxc_direct_start_ms', m.dstart);
    print('lxc_direct_exec_ms', m.dexec);
    print('lxc_create_ratio', m.create / m.dcreate);
    print('lxc_start_ratio', m.start / m.dstart);
    print('lxc_exec_ratio', m.exec / m.dexec);
    print('lxc_overhead_ratio', (m.create + m.start + m.exec) / (m.dcreate + m.dstart + m.dexec));
  } finally {
    killContainers(d.dataDir);
    for (const n of fs.existsSync(direct) ? fs.readdirSync(direct) : []) {
      if (n.startsWith('bench-')) spawn('lxc-stop', ['-P', direct, '-n', n, '-k']);
    }
    await d.stop();
    removeCgroupGroup(d.dataDir);
  }
}
