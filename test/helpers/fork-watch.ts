/**
 * The QEMU processes of a test's data dir, looked at over and over while a
 * fork's copies resume: each set of guests with the time it was first seen,
 * so that a test can hold every look against what had happened by then
 * (which copies ran, whether the parent was gone). A count, never a time
 * limit: the poll only sets how finely it looks.
 */
import { qemuGuests } from './vms-fixture.js';

export interface GuestLook {
  /** Read after the look: a set of guests is never dated before it was there. */
  at: number;
  /** The VMs (`vm-<vmid>`) whose QEMU ran, sorted. */
  vms: string[];
}

/** Looks until stopped; every change of the set of guests, in order (the first look too). */
export function watchGuests(root: string): { stop(): Promise<GuestLook[]> } {
  let stopped = false;
  const looks: GuestLook[] = [];
  const loop = (async () => {
    while (!stopped) {
      const vms = qemuGuests(root)
        .map((g) => g.vm)
        .sort();
      const at = Date.now();
      const last = looks.at(-1);
      if (!last || last.vms.join() !== vms.join()) looks.push({ at, vms });
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return looks;
    },
  };
}

/** The most guests any look saw, with the look. */
export function mostGuests(looks: GuestLook[]): GuestLook {
  return looks.reduce((a, b) => (b.vms.length > a.vms.length ? b : a), { at: 0, vms: [] });
}
