/**
 * hostd's cgroup group (`hostd-<hash of the lxc path>`) leaves nothing behind:
 * stale directories of its own group are removed at start, the group is gone
 * from every hierarchy once its last container is deleted and hostd stops,
 * a running container keeps its cgroup across a hostd stop, and another
 * hostd's group is never touched.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { tempDir } from '../../helpers/daemon.js';
import { cleanupLxc, lxcEnv, requireLxc } from '../../helpers/lxc-env.js';
import { cgroupGroup } from '../../../daemon/lxc/lxc-tools/index.js';
import { parseCgroupMounts, parseProcCgroup } from '../../../daemon/lxc/lxc-tools/cgroups.js';

/** Every place a group may be in: the root of each hierarchy, and below this process's own cgroup there. */
function groupPlaces(group: string): string[] {
  const layout = parseCgroupMounts(fs.readFileSync('/proc/self/mounts', 'utf8'));
  const own = parseProcCgroup(fs.readFileSync('/proc/self/cgroup', 'utf8'));
  const out = new Set<string>();
  for (const [ctrl, mp] of Object.entries(layout.v1)) {
    out.add(path.join(mp, group));
    if (own[ctrl] && own[ctrl] !== '/') out.add(path.join(mp, own[ctrl], group));
  }
  if (layout.unified) {
    out.add(path.join(layout.unified, group));
    if (own[''] && own[''] !== '/') out.add(path.join(layout.unified, own[''], group));
  }
  return [...out];
}

const existing = (dirs: string[]) => dirs.filter((d) => fs.existsSync(d));

/** v1 hierarchy roots (one per mount point). */
function v1Roots(): string[] {
  return [...new Set(Object.values(parseCgroupMounts(fs.readFileSync('/proc/self/mounts', 'utf8')).v1))];
}

describe('lxc runtime: cgroup directories are removed once unused', function () {
  this.timeout(240_000);
  const planted: string[] = [];

  before(async function () {
    await requireLxc(this);
  });
  after(async () => {
    await cleanupLxc();
    // Deepest first; those the daemon removed are gone already.
    for (const d of planted.reverse()) {
      try {
        fs.rmdirSync(d);
      } catch {
        /* gone */
      }
    }
  });

  it("stale ones of this hostd's group go at start, the group goes after the last container and hostd stop, a running container keeps its own", async () => {
    const dataDir = tempDir('hostd-lxc-cg-');
    const group = cgroupGroup(path.join(dataDir, 'lxc'));
    const other = cgroupGroup(path.join(dataDir, 'another-hostd', 'lxc'));
    // What a crash leaves: an empty container cgroup of this group in every v1 hierarchy; and another instance's.
    for (const root of v1Roots()) {
      for (const d of [path.join(root, group), path.join(root, group, 'ct-424242'), path.join(root, other), path.join(root, other, 'ct-1')]) {
        fs.mkdirSync(d);
        planted.push(d);
      }
    }
    let env = await lxcEnv({ dataDir });
    expect(existing(groupPlaces(group)), 'stale directories of this group after start').to.deep.equal([]);
    expect(existing(v1Roots().map((r) => path.join(r, other, 'ct-1'))), "another hostd's group").to.have.length(v1Roots().length);

    const c = await env.req('POST', '/lxc', { name: 'cg', template: 'bb' });
    expect(c.status, JSON.stringify(c.body)).to.equal(201);
    const id = c.body.container.lxcid;
    expect((await env.req('POST', `/lxc/${id}/start`)).status).to.equal(200);
    const ctDirs = groupPlaces(group).map((g) => path.join(g, `ct-${id}`));
    expect(existing(ctDirs), 'the running container has its cgroups').to.not.deep.equal([]);
    const held = existing(ctDirs);

    // hostd stops, the container runs on: its cgroups stay.
    await env.d.stop();
    expect(existing(held)).to.deep.equal(held);

    env = await lxcEnv({ dataDir, poolDirs: env.pools, imageId: null });
    expect(existing(held), 'a running container keeps its cgroups across a start').to.deep.equal(held);
    expect((await env.req('POST', `/lxc/${id}/stop`)).status).to.equal(200);
    expect((await env.req('DELETE', `/lxc/${id}`)).status).to.equal(200);
    await env.d.stop();
    expect(existing(groupPlaces(group)), 'directories of this group after the last container and hostd stopped').to.deep.equal([]);
    expect(existing(v1Roots().map((r) => path.join(r, other, 'ct-1')))).to.have.length(v1Roots().length);
  });
});
