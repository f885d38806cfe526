/** The QEMU implementation of the VM driver: machines, guest agent, qemu-img, seeds, identity. */
import type { VmDriver } from '../driver.js';
import { Machines } from './machine.js';
import { probeHost, type HostProbe } from './host.js';
import { backingChain, convertToQcow2, createQcow2, imageInfo, resizeImage } from './img.js';
import { writeIdentity } from './identity.js';
import { hashPassword, writeSeedIso } from './seed.js';

export function qemuDriver(): VmDriver {
  const m = new Machines();
  let probe: Promise<HostProbe> | null = null;
  return {
    host: (refresh) => {
      if (!probe || refresh) probe = probeHost();
      return probe;
    },
    start: (spec) => m.start(spec),
    status: (r) => m.status(r),
    stop: (r, grace) => m.stop(r, grace),
    kill: (r) => m.kill(r),
    saveMemory: (r, file) => m.saveMemory(r, file),
    snapshotRoot: (r, top, node) => m.snapshotRoot(r, top, node),
    activeRoot: (r) => m.activeRoot(r),
    cont: (r) => m.cont(r),
    attachDisk: (r, d) => m.attachDisk(r, d),
    detachDisk: (r, id, t) => m.detachDisk(r, id, t),
    growDisk: (r, id, size) => m.growDisk(r, id, size),
    ping: (r, t) => m.ping(r, t),
    agent: (r, c, a, t) => m.agent(r, c, a, t),
    exec: (r, c, t, input) => m.exec(r, c, t, input),
    addresses: (r, t) => m.addresses(r, t),
    writeGuestFile: (r, f, c, mode) => m.writeGuestFile(r, f, c, mode),
    imageInfo: (f) => imageInfo(f),
    backingChain: (f) => backingChain(f),
    createDisk: (f, size, backing) => createQcow2(f, size, backing),
    resizeDisk: (f, size) => resizeImage(f, size),
    copyDisk: (src, dst, opts) => convertToQcow2(src, dst, opts),
    writeIdentity: (disk, dir, plan) => writeIdentity(disk, dir, plan),
    writeSeed: (file, files) => writeSeedIso(file, files),
    hashPassword: (pw) => hashPassword(pw),
  };
}
