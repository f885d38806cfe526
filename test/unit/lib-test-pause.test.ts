/**
 * daemon/lib/test-pause.ts: the crash tests' one pause variable,
 * HOSTD_TEST_PAUSE_AT=<domain>.<step>, read from the environment the daemon
 * was given; a paused change logs the line a test waits for and never goes on.
 */
import { expect } from 'chai';
import { TEST_PAUSE_ENV, TEST_PAUSE_MSG, isPauseLine, pausePoint, testPause } from '../../daemon/lib/test-pause.js';

interface Line {
  obj: Record<string, unknown>;
  msg: string;
}

function recorder(): { lines: Line[]; warn(obj: Record<string, unknown>, msg: string): void } {
  const lines: Line[] = [];
  return { lines, warn: (obj, msg) => lines.push({ obj, msg }) };
}

/** Lets every pending promise callback run (one turn of the event loop), then says whether `p` settled. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
}

describe('testPause (daemon/lib/test-pause.ts)', () => {
  it('pausePoint splits <domain>.<step> at the first dot', () => {
    expect(pausePoint('lxc.create.before_commit')).to.deep.equal({ domain: 'lxc', step: 'create.before_commit' });
    expect(pausePoint('vms.create:recorded')).to.deep.equal({ domain: 'vms', step: 'create:recorded' });
    for (const bad of [undefined, '', 'nodot', '.step', 'vms.']) expect(pausePoint(bad), String(bad)).to.equal(null);
  });

  it('unset: every step goes on, and nothing is logged', async () => {
    const log = recorder();
    const pause = testPause({}, 'vms', log);
    expect(await settled(pause('create:recorded'))).to.equal(true);
    expect(log.lines).to.deep.equal([]);
  });

  it("another domain's point: this domain never pauses", async () => {
    const log = recorder();
    const pause = testPause({ [TEST_PAUSE_ENV]: 'lxc.create:recorded' }, 'vms', log);
    expect(await settled(pause('create:recorded'))).to.equal(true);
    expect(log.lines).to.deep.equal([]);
  });

  it("this domain's point: says so at creation; other steps go on; the step stops for good after logging the line tests wait for", async () => {
    const log = recorder();
    const pause = testPause({ [TEST_PAUSE_ENV]: 'apps.install:after-up' }, 'apps', log);
    expect(log.lines.map((l) => l.msg)).to.deep.equal(['test pause armed: a change reaching this step stops for good']);
    expect(await settled(pause('install:after-intent'))).to.equal(true);
    const stopped = pause('install:after-up');
    expect(await settled(stopped)).to.equal(false);
    const line = log.lines[1];
    expect(line.msg).to.equal(TEST_PAUSE_MSG);
    expect(line.obj).to.deep.equal({ domain: 'apps', step: 'install:after-up', at: 'apps.install:after-up' });
    expect(isPauseLine({ msg: line.msg, ...line.obj }, 'apps.install:after-up')).to.equal(true);
    expect(isPauseLine({ msg: line.msg, ...line.obj }, 'apps.install:after-intent')).to.equal(false);
    expect(isPauseLine({ msg: 'something else', at: 'apps.install:after-up' }, 'apps.install:after-up')).to.equal(false);
  });

  it('a value without a domain arms nothing and says why', async () => {
    const log = recorder();
    const pause = testPause({ [TEST_PAUSE_ENV]: 'create' }, 'folders', log);
    expect(await settled(pause('create'))).to.equal(true);
    expect(log.lines.map((l) => l.msg)).to.deep.equal([`${TEST_PAUSE_ENV} must be <domain>.<step>; no pause is armed`]);
  });

  it('reads only the environment it is given, never process.env', async () => {
    const before = process.env[TEST_PAUSE_ENV];
    process.env[TEST_PAUSE_ENV] = 'vms.start';
    try {
      const pause = testPause({}, 'vms', recorder());
      expect(await settled(pause('start'))).to.equal(true);
    } finally {
      if (before === undefined) delete process.env[TEST_PAUSE_ENV];
      else process.env[TEST_PAUSE_ENV] = before;
    }
  });
});
