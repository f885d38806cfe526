/**
 * daemon/lib/availability.ts: the driver contract's availability method, the
 * one call a service makes before using its runtime (503 naming the program,
 * asking again before refusing), and the probe cache drivers answer from.
 */
import { expect } from 'chai';
import { ProbeCache, availableAs, ensureAvailable, missing, type Availability, type RuntimeDriver } from '../../daemon/lib/availability.js';
import { rejectsApi } from '../helpers/expect.js';

/** A driver whose programs the test installs and removes; counts its fresh probes. */
class FakeDriver implements RuntimeDriver {
  fresh = 0;
  constructor(
    public cached: Availability[],
    public now: Availability[] = cached,
  ) {}
  async availability(opts: { fresh?: boolean } = {}): Promise<Availability[]> {
    if (!opts.fresh) return this.cached;
    this.fresh++;
    this.cached = this.now;
    return this.now;
  }
}

const qemu = availableAs('qemu-system-x86_64', '7.2.0');
const img = availableAs('qemu-img', '7.2.0');
const noImg = missing('qemu-img', 'not installed (install the qemu-utils package)');

describe('availability (daemon/lib/availability.ts)', () => {
  describe('ensureAvailable', () => {
    it('resolves from the cached answer when every named program is there, without probing', async () => {
      const d = new FakeDriver([qemu, img]);
      expect(await ensureAvailable(d, ['qemu-img'])).to.deep.equal([qemu, img]);
      expect(d.fresh).to.equal(0);
    });

    it('503 naming the missing program and what to install, after asking the driver again', async () => {
      const d = new FakeDriver([qemu, noImg]);
      await rejectsApi(
        ensureAvailable(d, ['qemu-system-x86_64', 'qemu-img']),
        503,
        'qemu-img is not available: not installed (install the qemu-utils package)',
      );
      expect(d.fresh).to.equal(1);
    });

    it('a program installed since the cached probe is found by the fresh one (no restart needed)', async () => {
      const d = new FakeDriver([qemu, noImg], [qemu, img]);
      await ensureAvailable(d, ['qemu-img']);
      expect(d.fresh).to.equal(1);
    });

    it('without names, every program the driver reports must be there', async () => {
      await rejectsApi(ensureAvailable(new FakeDriver([qemu, noImg])), 503, 'qemu-img is not available: not installed (install the qemu-utils package)');
      await ensureAvailable(new FakeDriver([qemu, img]));
    });

    it('a name the driver does not report is a programming error (500), not a missing program', async () => {
      await rejectsApi(
        ensureAvailable(new FakeDriver([qemu]), ['qemu-nbd']),
        500,
        "the runtime reports no program named 'qemu-nbd' (it reports qemu-system-x86_64)",
      );
    });
  });

  describe('ProbeCache', () => {
    it('answers from the cache within its time to live, probes again after it or when asked fresh', async () => {
      let t = 1000;
      let probes = 0;
      const cache = new ProbeCache(
        async () => ++probes,
        5000,
        () => t,
      );
      expect(await cache.get()).to.equal(1);
      t += 4999;
      expect(await cache.get()).to.equal(1);
      t += 1;
      expect(await cache.get()).to.equal(2);
      expect(await cache.get({ fresh: true })).to.equal(3);
      expect(await cache.get()).to.equal(3);
    });

    it('concurrent callers share one probe in flight', async () => {
      let probes = 0;
      let finish!: (v: number) => void;
      const cache = new ProbeCache(() => {
        probes++;
        return new Promise<number>((r) => (finish = r));
      });
      const a = cache.get();
      const b = cache.get({ fresh: true });
      finish(7);
      expect(await Promise.all([a, b])).to.deep.equal([7, 7]);
      expect(probes).to.equal(1);
    });

    it('a probe that throws is not kept: the next call probes again', async () => {
      let probes = 0;
      const cache = new ProbeCache(async () => {
        probes++;
        if (probes === 1) throw new Error('ENOMEM');
        return 'ok';
      });
      let err: unknown;
      await cache.get().catch((e) => (err = e));
      expect((err as Error).message).to.equal('ENOMEM');
      expect(await cache.get()).to.equal('ok');
      expect(probes).to.equal(2);
    });
  });
});
