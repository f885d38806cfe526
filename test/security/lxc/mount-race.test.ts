/**
 * A mount point swapped for a symlink while a start is under way (a guest
 * that can write the shared folder races the start): what the container
 * gets is the directory the rule judged, or nothing.
 *
 * The daemon holds the start at a step (`HOSTD_TEST_HOLD_AT=lxc.<step>`,
 * released by a file) while the test replaces a component of the mount
 * point's host path with a symlink to a directory outside every allowed
 * root, then lets the start go on:
 * - after the rule's first check (`start.checked`): the start opens the path
 *   and judges where the descriptor leads, so it is 409 naming the mount and
 *   nothing is mounted;
 * - after the path was opened and judged (`start.pinned`): LXC mounts the
 *   opened descriptor, so the container sees the judged directory (moved
 *   aside by the swap), never the symlink's target.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { eventually, tempDir } from '../../helpers/daemon.js';
import { cleanupLxc, lxcEnv, requireLxc, type LxcEnv } from '../../helpers/lxc-env.js';
import { MOUNT_RULE } from '../../../daemon/lxc/containment.js';

describe('lxc security: a mount point swapped for a symlink during a start', function () {
  this.timeout(300_000);
  let env: LxcEnv;
  let dataDir: string;
  let pools: Record<string, string>;
  let outside: string;
  let share: string;
  let lxcid: number;

  before(async function () {
    await requireLxc(this);
    outside = tempDir('hostd-lxc-outside-');
    fs.mkdirSync(path.join(outside, 'inner'));
    fs.writeFileSync(path.join(outside, 'inner', 'marker'), 'outside\n');
    env = await lxcEnv();
    dataDir = env.d.dataDir;
    pools = env.pools;
    share = (await env.folder('share')).path;
    fs.mkdirSync(path.join(share, 'sub', 'inner'), { recursive: true });
    fs.writeFileSync(path.join(share, 'sub', 'inner', 'marker'), 'checked\n');
    const c = await env.req('POST', '/lxc', {
      name: 'racer',
      template: 'bb',
      mount_points: [{ host_path: path.join(share, 'sub', 'inner'), container_path: '/mnt/in', read_only: true }],
    });
    expect(c.status, JSON.stringify(c.body)).to.equal(201);
    lxcid = c.body.container.lxcid;
    await env.d.stop();
  });
  after(async () => {
    await cleanupLxc();
    if (share) unswap();
  });

  const sub = () => path.join(share, 'sub');
  /** Replaces the mount point's parent directory with a symlink to the outside directory (the judged one moves aside). */
  const swap = () => {
    fs.renameSync(sub(), `${sub()}.away`);
    fs.symlinkSync(outside, sub());
  };
  const unswap = () => {
    if (fs.lstatSync(sub(), { throwIfNoEntry: false })?.isSymbolicLink()) fs.unlinkSync(sub());
    if (fs.existsSync(`${sub()}.away`)) fs.renameSync(`${sub()}.away`, sub());
  };
  /** Nothing of the outside directory is mounted anywhere. */
  const outsideMounted = () =>
    fs
      .readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .filter((l) => l.includes(outside));

  /** A daemon on the same data dir that holds a start at `step`; starts the container, swaps at the hold, releases. */
  const startSwappedAt = async (step: string) => {
    const release = path.join(tempDir('hostd-lxc-hold-'), 'release');
    env = await lxcEnv({ dataDir, poolDirs: pools, imageId: null, env: { HOSTD_TEST_HOLD_AT: `lxc.${step}`, HOSTD_TEST_HOLD_RELEASE: release } });
    const started = env.req('POST', `/lxc/${lxcid}/start`);
    await eventually(() => env.d.logs.find((l) => l.msg === 'test hold' && l.at === `lxc.${step}`), 120_000, `the hold at ${step}`);
    swap();
    fs.writeFileSync(release, '');
    return started;
  };

  it('swapped after the rule was checked: the start is 409 naming the mount, nothing is mounted', async () => {
    try {
      const r = await startSwappedAt('start.checked');
      expect(r.status, JSON.stringify(r.body)).to.equal(409);
      expect(r.body).to.deep.equal({
        error: `container ${lxcid} cannot start: mount point /mnt/in: its host path ${path.join(share, 'sub', 'inner')} now resolves elsewhere (a component was replaced by a symlink): ${MOUNT_RULE}`,
      });
      expect((await env.req('GET', `/lxc/${lxcid}`)).body.container.state).to.equal('stopped');
      expect(outsideMounted()).to.deep.equal([]);
    } finally {
      unswap();
      await env.d.stop();
    }
  });

  it('swapped after the path was opened and judged: the container gets the judged directory, not the symlink target', async () => {
    try {
      const r = await startSwappedAt('start.pinned');
      expect(r.status, JSON.stringify(r.body)).to.equal(200);
      expect(outsideMounted()).to.deep.equal([]);
      // Exec checks the rule again (the swapped path breaks it): put the path back first. What the
      // container mounted at start stays what it is, so it still shows which directory that was.
      unswap();
      const cat = await env.req('POST', `/lxc/${lxcid}/exec`, { command: 'cat /mnt/in/marker' });
      expect(cat.status, JSON.stringify(cat.body)).to.equal(200);
      expect(cat.body.stdout).to.equal('checked\n');
      expect((await env.req('POST', `/lxc/${lxcid}/stop`)).status).to.equal(200);
    } finally {
      unswap();
    }
  });
});
