/**
 * The LXC driver's host facts (lxc-tools/index.ts `hostFacts`): every start,
 * stop and exec asks for them, so a call never waits for a probe once there
 * are facts; facts older than the refresh interval start one probe in the
 * background; `fresh` (host-status, and the check before a 503) waits for a
 * new probe. On a counting probe and a hand-moved clock.
 */
import { expect } from 'chai';
import { ProbeCache } from '../../../daemon/lib/availability.js';
import type { HostFacts } from '../../../daemon/lxc/driver.js';
import { HOST_FACTS_REFRESH_MS, hostFacts } from '../../../daemon/lxc/lxc-tools/index.js';

function facts(n: number): HostFacts {
  return {
    programs: [],
    lxcVersion: `5.0.${n}`,
    cgroups: { version: 'v2', controllers: [] },
    cgroupMissing: [],
    apparmor: false,
    selinux: null,
    idmap: { ready: true, uid_range: null, gid_range: null, reason: null },
    idrange: null,
  };
}

describe('lxc host facts', () => {
  let clock: number;
  let probes: number;
  let gate: Promise<void>;
  let open: () => void;
  let host: ReturnType<typeof hostFacts>;

  beforeEach(() => {
    clock = 1_000_000;
    probes = 0;
    gate = Promise.resolve();
    const probe = new ProbeCache<HostFacts>(
      async () => {
        const n = ++probes;
        await gate;
        return facts(n);
      },
      60_000,
      () => clock,
    );
    host = hostFacts(probe, () => clock);
  });

  const hold = () => {
    gate = new Promise((r) => (open = r));
  };

  it('probes for the first call, then answers from the facts at hand', async () => {
    expect((await host()).lxcVersion).to.equal('5.0.1');
    clock += HOST_FACTS_REFRESH_MS - 1;
    expect((await host()).lxcVersion).to.equal('5.0.1');
    expect(probes).to.equal(1);
  });

  it('facts past the refresh interval: the call gets them at once while one probe runs behind it', async () => {
    await host();
    clock += HOST_FACTS_REFRESH_MS;
    hold();
    // The probe is held: the calls do not wait for it, and only one starts.
    expect((await host()).lxcVersion).to.equal('5.0.1');
    expect((await host()).lxcVersion).to.equal('5.0.1');
    expect(probes).to.equal(2);
    open();
    await gate;
    await new Promise((r) => setImmediate(r));
    expect((await host()).lxcVersion).to.equal('5.0.2');
    expect(probes).to.equal(2);
  });

  it('fresh waits for a new probe, whatever the age of the facts', async () => {
    await host();
    expect((await host({ fresh: true })).lxcVersion).to.equal('5.0.2');
    expect((await host()).lxcVersion).to.equal('5.0.2');
    expect(probes).to.equal(2);
  });

  it('a background probe that fails keeps the facts there were, and the next call tries again', async () => {
    let fail = false;
    const probe = new ProbeCache<HostFacts>(
      async () => {
        const n = ++probes;
        if (fail) throw new Error('probe failed');
        return facts(n);
      },
      60_000,
      () => clock,
    );
    host = hostFacts(probe, () => clock);
    await host();
    fail = true;
    clock += HOST_FACTS_REFRESH_MS;
    expect((await host()).lxcVersion).to.equal('5.0.1');
    await new Promise((r) => setImmediate(r));
    fail = false;
    expect((await host()).lxcVersion).to.equal('5.0.1');
    await new Promise((r) => setImmediate(r));
    expect((await host()).lxcVersion).to.equal('5.0.3');
  });
});
