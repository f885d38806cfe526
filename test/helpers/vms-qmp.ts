/**
 * What a VM's QEMU itself says, asked over its own QMP socket rather than
 * through hostd. QEMU serves one QMP client at a time and hostd keeps its
 * connection open, so the test kills hostd first (its VMs run on, they are
 * daemonized), asks, and starts hostd again on the same data dir.
 */
import path from 'node:path';
import { QmpClient } from '../../daemon/vms/qemu/qmp.js';
import type { VmsEnv } from './vms-fixture.js';

/** The QMP socket of VM `vmid` of the test daemon (under <root>/data/run). */
export const qmpSocket = (e: VmsEnv, vmid: number) => path.join(e.root, 'data', 'run', `vm-${vmid}`, 'qmp.sock');

/** Runs `fn` against each VM's own QMP socket while hostd is down; returns the restarted daemon's env. */
export async function withHostdDown<T>(
  e: VmsEnv,
  restart: () => Promise<VmsEnv>,
  vmids: number[],
  fn: (qmp: QmpClient, vmid: number) => Promise<T>,
): Promise<{ e: VmsEnv; results: Map<number, T> }> {
  await e.d.kill();
  const results = new Map<number, T>();
  try {
    for (const vmid of vmids) {
      const qmp = await QmpClient.connect(qmpSocket(e, vmid), 30_000);
      try {
        results.set(vmid, await fn(qmp, vmid));
      } finally {
        qmp.close();
      }
    }
  } finally {
    e = await restart();
  }
  return { e, results };
}

/** QEMU's answer to query-vm-generation-id, or the error it gave (no device). */
export async function generationIdOf(qmp: QmpClient): Promise<string> {
  try {
    return (await qmp.execute<{ guid: string }>('query-vm-generation-id')).guid;
  } catch (err) {
    return `error: ${(err as Error).message}`;
  }
}
