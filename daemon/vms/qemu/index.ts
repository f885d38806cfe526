/** The QEMU implementation of the VM driver: machines, guest agent, qemu-img, seeds, identity. */
import type { GuestFileDriver, VmDriver } from '../driver.js';
import { Machines } from './machine.js';
import { ProbeCache } from '../../lib/availability.js';
import { FIRST_DISK_SLOT, LAST_DISK_SLOT, macFor } from './args.js';
import { bootId, hostResources, probeHost, type HostProbe } from './host.js';
import { backingChain, ChainCache, confinedChain, convertToQcow2, createQcow2, imageInfo, resizeImage } from './img.js';
import { writeIdentity } from './identity.js';
import { hashPassword, renderSeed, writeSeedIso } from './seed.js';

/**
 * `diskRoots`: the directories hostd keeps disks in (each pool's `.vms`). No
 * disk outside them is started, opened for its identity, copied from through
 * its backing chain, or used as a backing file (an operator's import may name
 * any file, but not one that rests on a file outside). A refusal is a
 * DiskChainEscape (img.ts) naming the layer.
 */
export function qemuDriver(opts: { diskRoots: string[] }): VmDriver & { files: GuestFileDriver } {
  const roots = opts.diskRoots;
  const cache = new ChainCache();
  const confine = (file: string, topAnywhere = false) => confinedChain(file, roots, { topAnywhere, cache });
  const m = new Machines(confine);
  const probe = new ProbeCache<HostProbe>(() => probeHost());
  return {
    // ---- the host
    availability: (o) => probe.get(o).then((h) => [...h.programs, h.fuse]),
    host: (o) => probe.get(o),
    resources: () => hostResources(),
    bootId: (file) => bootId(file),
    macFor: (vmid, salt) => macFor(vmid, salt),
    diskSlots: { first: FIRST_DISK_SLOT, last: LAST_DISK_SLOT },
    // ---- machines
    start: (spec) => m.start(spec),
    status: (r) => m.status(r),
    stop: (r, grace) => m.stop(r, grace),
    kill: (r) => m.kill(r),
    watch: (r, fn) => m.watch(r, fn),
    saveMemory: (r, file) => m.saveMemory(r, file),
    snapshotRoot: (r, top, node) => m.snapshotRoot(r, top, node),
    activeRoot: (r) => m.activeRoot(r),
    cont: (r) => m.cont(r),
    generationId: (r) => m.generationId(r),
    attachDisk: (r, d) => m.attachDisk(r, d),
    detachDisk: (r, id, t) => m.detachDisk(r, id, t),
    growDisk: (r, id, size) => m.growDisk(r, id, size),
    usage: (r) => m.usage(r),
    // ---- the guest agent
    ping: (r, t) => m.ping(r, t),
    agent: (r, c, a, t) => m.agent(r, c, a, t),
    exec: (r, c, t, opts) => m.exec(r, c, t, opts),
    addresses: (r, t) => m.addresses(r, t),
    writeGuestFile: (r, f, c, mode) => m.writeGuestFile(r, f, c, mode),
    // ---- disk files
    imageInfo: (f) => imageInfo(f),
    backingChain: (f) => backingChain(f),
    createDisk: async (f, size, backing) => {
      if (backing) await confine(backing);
      await createQcow2(f, size, backing);
    },
    resizeDisk: (f, size) => resizeImage(f, size),
    copyDisk: async (src, dst, o) => {
      await confine(src, true);
      await convertToQcow2(src, dst, o);
    },
    // ---- identity and cloud-init
    writeIdentity: async (disk, dir, plan) => {
      // qemu-storage-daemon opens the disk's whole chain, as QEMU would.
      await confine(disk);
      return writeIdentity(disk, dir, plan);
    },
    writeSeed: (file, seed) => {
      const files = renderSeed(seed);
      if (seed.userData !== undefined) files['user-data'] = seed.userData;
      return writeSeedIso(file, files);
    },
    hashPassword: (pw) => hashPassword(pw),
    // ---- guest files (the same agent connections as exec)
    files: {
      stat: (r, f) => m.files(r).stat(f),
      list: (r, d) => m.files(r).list(d),
      read: (r, f, off, len) => m.files(r).read(f, off, len),
      put: (r, f, data, o) => m.files(r).put(f, data, o),
      remove: (r, f, rec) => m.files(r).remove(f, rec),
    },
  };
}
