/**
 * Start-up recovery of the VM domain's open intents: each change that was
 * under way when hostd died is finished or rolled back by what the disk, the
 * process table (pidfiles, QMP) and the store show, so that records, files and
 * processes agree again. Also reconciles a VM's root layers with the layer its
 * running QEMU really writes (a warm-state save may have died between the
 * disk snapshot and the record update).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import type { JournalOp } from '../lib/journal.js';
import { vmKey, WARM_FORMAT, type VmIntent, type VmRecord, type WarmStateRecord } from './records.js';
import { VmService } from './service.js';

async function exists(p: string): Promise<boolean> {
  try {
    await fs.access(p);
    return true;
  } catch {
    return false;
  }
}

/**
 * What intents do not cover, after them: a create interrupted after its
 * intent was settled leaves no `creating` record behind; any that remain are
 * tasks the runner marked interrupted.
 */
export async function reconcileCreating(svc: VmService): Promise<void> {
  const r = svc.records;
  for (const v of await r.allVms()) {
    if (v.state === 'creating') {
      svc.e.log.warn({ vmid: v.vmid }, 'vms: removing a VM whose creation was interrupted');
      await svc.driver.kill(svc.ref(v.vmid)).catch(() => undefined);
      await fs.rm(v.dir, { recursive: true, force: true });
      await r.vms.del(vmKey(v.vmid));
    }
  }
}

/** What a log line may say about an intent: its op and the resource it names (never paths or names). */
export function describeIntent(i: VmIntent): Record<string, unknown> {
  const out: Record<string, unknown> = { op: i.op };
  if ('vmid' in i) out.vmid = i.vmid;
  if ('image_id' in i) out.image_id = i.image_id;
  if ('id' in i) out.warm_state_id = i.id;
  return out;
}

async function reconcileLayers(svc: VmService, rec: VmRecord, newLayer: string): Promise<boolean> {
  if (rec.root_layers.includes(newLayer)) return false;
  const st = await svc.driver.status(svc.ref(rec.vmid));
  if (st.running) {
    const active = await svc.driver.activeRoot(svc.ref(rec.vmid)).catch(() => null);
    if (active && path.basename(active.file) === newLayer) {
      rec.root_layers.push(newLayer);
      return true;
    }
    return false;
  }
  // Not running: the new layer counts only if QEMU made it (it rests on our active layer).
  const file = path.join(rec.dir, newLayer);
  if (!(await exists(file))) return false;
  try {
    const info = await svc.driver.imageInfo(file);
    if (info.backingFile && path.basename(info.backingFile) === rec.root_layers[rec.root_layers.length - 1]) {
      rec.root_layers.push(newLayer);
      return true;
    }
  } catch {
    /* unreadable: not ours */
  }
  await fs.rm(file, { force: true });
  return false;
}

/** Finishes or undoes one interrupted change by what the disk and the process table show; the store writes of the outcome. */
export async function settle(svc: VmService, i: VmIntent): Promise<JournalOp[]> {
  const r = svc.records;
  const d = svc.driver;
  switch (i.op) {
    case 'create': {
      // The record is committed with the intent's drop: an open intent means the VM was never finished.
      await d.kill(svc.ref(i.vmid)).catch(() => undefined);
      await fs.rm(i.dir, { recursive: true, force: true });
      await fs.rm(svc.runDir(i.vmid), { recursive: true, force: true });
      await svc.e.secrets.delete(VmService.SEED_NS, `seed-${i.vmid}`).catch(() => undefined);
      return (await r.vm(i.vmid)) ? [r.delVm(i.vmid)] : [];
    }
    case 'delete': {
      await d.kill(svc.ref(i.vmid)).catch(() => undefined);
      await fs.rm(i.dir, { recursive: true, force: true });
      await fs.rm(svc.runDir(i.vmid), { recursive: true, force: true });
      await svc.e.secrets.delete(VmService.SEED_NS, `seed-${i.vmid}`).catch(() => undefined);
      await svc.e.secrets.delete(VmService.SEED_NS, `password-${i.vmid}`).catch(() => undefined);
      return [r.delVm(i.vmid), r.delDocs(i.vmid)];
    }
    case 'suspend': {
      const rec = await r.vm(i.vmid);
      if (!rec) return [];
      const st = await d.status(svc.ref(i.vmid));
      if (st.running) {
        // The save did not finish (or QEMU did not quit): the guest goes on.
        if (st.status !== 'running') await d.cont(svc.ref(i.vmid)).catch(() => undefined);
        await fs.rm(`${i.file}.part`, { force: true });
        await fs.rm(i.file, { force: true });
        return [];
      }
      if (await exists(i.file)) {
        rec.state = 'suspended';
        rec.resume_file = i.file;
        return [r.putVm(rec)];
      }
      // QEMU ended after a completed save but before the file got its name: it is whole.
      if (await exists(`${i.file}.part`)) {
        await fs.rename(`${i.file}.part`, i.file);
        rec.state = 'suspended';
        rec.resume_file = i.file;
        return [r.putVm(rec)];
      }
      rec.state = 'stopped';
      return [r.putVm(rec)];
    }
    case 'resume': {
      const rec = await r.vm(i.vmid);
      if (!rec) return [];
      const st = await d.status(svc.ref(i.vmid));
      if (st.running) {
        rec.state = 'stopped';
        rec.resume_file = null;
        await fs.rm(i.file, { force: true });
        return [r.putVm(rec)];
      }
      return [];
    }
    case 'warm-save': {
      const rec = await r.vm(i.vmid);
      const ops: JournalOp[] = [];
      if (rec) {
        const st = await d.status(svc.ref(i.vmid));
        if (st.running && st.status !== 'running') await d.cont(svc.ref(i.vmid)).catch(() => undefined);
        if (await reconcileLayers(svc, rec, i.new_layer)) ops.push(r.putVm(rec));
      }
      const memory = path.join(i.dir, 'memory.state');
      const disk = path.join(i.dir, 'disk.qcow2');
      if (rec && (await exists(memory)) && (await exists(disk))) {
        const st1 = await fs.stat(memory);
        const st2 = await fs.stat(disk);
        const w: WarmStateRecord = {
          id: i.id,
          name: i.name ?? rec.name,
          vmid: rec.vmid,
          owner: rec.owner,
          image_id: rec.image_id,
          storage_id: rec.storage_id,
          dir: i.dir,
          memory_file: memory,
          disk_file: disk,
          base_image_id: rec.base_image_id,
          base_warm_state_id: rec.base_warm_state_id,
          cpu_cores: rec.cpu_cores,
          memory_mb: rec.memory_mb,
          disk_size_gb: rec.disk_size_gb,
          network_type: rec.cloud_init.network_type,
          cloud_init: { ...rec.cloud_init },
          size_bytes: st1.size + st2.size,
          created_at: new Date().toISOString(),
          // Resumable only when the intent says which generation ID the saved machine had.
          ...(i.vmgenid ? { format: WARM_FORMAT, vmgenid: i.vmgenid } : {}),
        };
        ops.push(r.putWarm(w));
        return ops;
      }
      await fs.rm(i.dir, { recursive: true, force: true });
      return ops;
    }
    case 'warm-restore': {
      // The record is committed with the drop: an open intent means the restore did not finish.
      await d.kill(svc.ref(i.vmid)).catch(() => undefined);
      await fs.rm(i.dir, { recursive: true, force: true });
      await fs.rm(svc.runDir(i.vmid), { recursive: true, force: true });
      return (await r.vm(i.vmid)) ? [r.delVm(i.vmid)] : [];
    }
    case 'warm-delete':
      await fs.rm(i.dir, { recursive: true, force: true });
      return [r.delWarm(i.id)];
    case 'template':
    case 'image-add': {
      // Work files of captures, imports, builds and conversions (never a resumable download's .part).
      const partial = path.join(path.dirname(i.file), '.partial');
      for (const kind of ['template', 'import', 'build']) await fs.rm(path.join(partial, `${i.image_id}.${kind}.qcow2`), { force: true });
      await fs.rm(path.join(partial, `${i.image_id}.qcow2`), { force: true });
      if (await r.image(i.image_id)) return [];
      await fs.rm(i.file, { force: true });
      return [];
    }
    case 'image-delete':
      await fs.rm(i.file, { force: true });
      return [r.delImage(i.image_id)];
    case 'image-move': {
      const img = await r.image(i.image_id);
      await fs.rm(`${i.to}.part`, { force: true });
      if (img && img.file === i.to) {
        if (await exists(i.to)) await fs.rm(i.from, { force: true });
        return [];
      }
      // Not committed: the source stays; a finished copy is dropped.
      if (await exists(i.from)) await fs.rm(i.to, { force: true });
      return [];
    }
    case 'iso-move':
      await fs.rm(`${i.to}.part`, { force: true });
      if ((await exists(i.to)) && (await exists(i.from))) await fs.rm(i.from, { force: true });
      return [];
    case 'disk-attach': {
      const rec = await r.vm(i.vmid);
      if (rec?.disks.some((x) => x.disk_id === i.disk_id)) return [];
      if (rec && (await d.status(svc.ref(i.vmid))).running) await d.detachDisk(svc.ref(i.vmid), i.disk_id, 10_000).catch(() => undefined);
      await fs.rm(i.file, { force: true });
      return [];
    }
    case 'disk-detach': {
      const rec = await r.vm(i.vmid);
      if (rec && (await d.status(svc.ref(i.vmid))).running) await d.detachDisk(svc.ref(i.vmid), i.disk_id, 10_000).catch(() => undefined);
      await fs.rm(i.file, { force: true });
      if (!rec) return [];
      rec.disks = rec.disks.filter((x) => x.disk_id !== i.disk_id);
      return [r.putVm(rec)];
    }
    case 'disk-grow': {
      const rec = await r.vm(i.vmid);
      const disk = rec?.disks.find((x) => x.disk_id === i.disk_id);
      if (!rec || !disk) return [];
      const info = await d.imageInfo(i.file);
      disk.size_gb = Math.floor(info.virtualSize / 1024 ** 3);
      return [r.putVm(rec)];
    }
    case 'seed': {
      const rec = await r.vm(i.vmid);
      if (rec) await svc.writeSeed(rec);
      return [];
    }
  }
}
