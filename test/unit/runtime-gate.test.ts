/**
 * test/helpers/runtime-gate.ts: the one gate of runtime tests. It asks the
 * domain's own driver (and whatever else the suite needs); a missing runtime
 * skips with the domain and the reason on a developer's machine and fails
 * under CI (.ci/run sets CI=1), so a runtime test that cannot run never
 * passes CI by skipping.
 */
import { expect } from 'chai';
import { availableAs, missing, type Availability, type RuntimeDriver } from '../../daemon/lib/availability.js';
import { gateDecision, inCi, requireRuntime, runtimeProblem } from '../helpers/runtime-gate.js';

const driver = (list: Availability[]): RuntimeDriver & { asked: Array<{ fresh?: boolean } | undefined> } => {
  const asked: Array<{ fresh?: boolean } | undefined> = [];
  return { asked, availability: async (o) => (asked.push(o), list) };
};

describe('the runtime gate (test/helpers/runtime-gate.ts)', () => {
  it('CI counts when set to anything but empty, 0 or false', () => {
    for (const v of ['1', 'true', 'yes']) expect(inCi({ CI: v }), v).to.equal(true);
    for (const v of [undefined, '', '0', 'false', 'FALSE']) expect(inCi({ CI: v }), String(v)).to.equal(false);
  });

  it("asks the domain's driver, fresh, and names every missing program with its reason", async () => {
    const d = driver([availableAs('lxc-start', '5.0.2'), missing('newuidmap', 'not installed (install uidmap)'), missing('zfs', 'no ZFS')]);
    expect(await runtimeProblem(d, { need: ['lxc-start'] })).to.equal(null);
    expect(d.asked).to.deep.equal([{ fresh: true }]);
    expect(await runtimeProblem(d, { need: ['lxc-start', 'newuidmap'] })).to.equal('newuidmap is not available (not installed (install uidmap))');
    expect(await runtimeProblem(d)).to.equal('newuidmap is not available (not installed (install uidmap)); zfs is not available (no ZFS)');
    expect(await runtimeProblem(d, { need: ['lxc-attach'] })).to.equal('lxc-attach is not available (the driver does not report it)');
  });

  it('then asks what else the suite needs', async () => {
    const d = driver([availableAs('caddy', '2.6.2')]);
    expect(await runtimeProblem(d, { also: () => 'the proxy tests need root' })).to.equal('the proxy tests need root');
    expect(await runtimeProblem(async () => [availableAs('caddy', null)], { also: async () => null })).to.equal(null);
  });

  it('runs when nothing is missing; skips with the domain and the reason; fails under CI', () => {
    expect(gateDecision('vms', null, { CI: '1' }).action).to.equal('run');
    expect(gateDecision('vms', 'qemu-img is not available (x)', {})).to.deep.equal({
      action: 'skip',
      message: 'skipped (vms runtime): qemu-img is not available (x)',
    });
    const ci = gateDecision('vms', 'qemu-img is not available (x)', { CI: '1' });
    expect(ci.action).to.equal('fail');
    expect(ci.message).to.equal(
      'the vms runtime tests cannot run: qemu-img is not available (x). CI installs every runtime (deploy/install-deps.sh), so a runtime test that would skip fails the run',
    );
  });

  describe('requireRuntime in a suite', () => {
    it('throws under CI instead of skipping', async function () {
      let err: unknown;
      await requireRuntime(this, 'apps', driver([missing('dockerd', 'not running')]), { env: { CI: '1' } }).catch((e) => (err = e));
      expect((err as Error).message).to.match(/^the apps runtime tests cannot run: dockerd is not available \(not running\)/);
    });

    it('off CI, prints the domain and the reason, then skips', async () => {
      const printed: string[] = [];
      const write = process.stdout.write;
      let skipped = false;
      const ctx = {
        skip: () => {
          skipped = true;
          throw new Error('skip called');
        },
      } as unknown as Mocha.Context;
      process.stdout.write = ((chunk: string) => (printed.push(String(chunk)), true)) as typeof process.stdout.write;
      try {
        await requireRuntime(ctx, 'apps', driver([missing('dockerd', 'not running')]), { env: {} }).catch(() => undefined);
      } finally {
        process.stdout.write = write;
      }
      expect(skipped).to.equal(true);
      expect(printed).to.deep.equal(['      skipped (apps runtime): dockerd is not available (not running)\n']);
    });

    it('returns when the runtime is there', async function () {
      await requireRuntime(this, 'apps', driver([availableAs('dockerd', '20.10')]), { env: { CI: '1' } });
    });
  });
});
