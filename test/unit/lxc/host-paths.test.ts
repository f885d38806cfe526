/**
 * The host-path rule (daemon/lib/host-paths.ts) as LXC mount points use it,
 * the folder names it reserves (daemon/folders/names.ts), and the rule on a
 * real filesystem: symlinks resolved, a path swapped for a link after it was
 * allowed.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  INTERNAL_PREFIX,
  internalDirName,
  isInternalName,
  judgeHostPath,
  LEGACY_INTERNAL_NAMES,
  realRoots,
  type HostPathPolicy,
} from '../../../daemon/lib/host-paths.js';
import { checkNotInternal } from '../../../daemon/folders/names.js';
import { checkNewMounts, mountPolicy, mountViolation, violations, MOUNT_RULE } from '../../../daemon/lxc/containment.js';
import { INTERNAL_DIR } from '../../../daemon/lxc/lxc-tools/storage.js';
import type { ContainerRecord } from '../../../daemon/lxc/model.js';

const refusal = async (p: Promise<unknown>): Promise<{ status: number; message: string }> => {
  try {
    await p;
  } catch (e) {
    return { status: (e as { status: number }).status, message: (e as Error).message };
  }
  throw new Error('did not throw');
};

describe('host paths: the names hostd keeps for itself', () => {
  it('one convention covers every domain: .hostd-<anything> and the legacy .vms', () => {
    for (const n of ['.hostd-lxc', '.hostd-apps', '.hostd-trash-f_1-ab', '.hostd-copy-12', '.hostd-sandboxes', '.vms', '.VMS', '.Hostd-x'])
      expect(isInternalName(n), n).to.equal(true);
    for (const n of ['media', '.hostd', 'hostd-x', '.vms2', 'vms', '.hidden']) expect(isInternalName(n), n).to.equal(false);
    expect(internalDirName('lxc')).to.equal(INTERNAL_DIR);
    expect(INTERNAL_PREFIX).to.equal('.hostd-');
    expect(LEGACY_INTERNAL_NAMES).to.deep.equal(['.vms']);
  });

  it('a folder cannot take one of those names', () => {
    for (const [name, msg] of [
      ['.hostd-apps', "argument 'name' must not start with '.hostd-' (reserved)"],
      ['.vms', "argument 'name' must not be '.vms' (reserved)"],
      ['.Vms', "argument 'name' must not be '.vms' (reserved)"],
    ]) {
      expect(() => checkNotInternal(name, 'name')).to.throw(msg);
    }
    expect(checkNotInternal('media', 'new_name')).to.equal('media');
  });
});

describe('host paths: judgeHostPath', () => {
  const policy: HostPathPolicy = {
    allowed: [
      { path: '/pools/a/media', label: "managed folder 'media'" },
      { path: '/var/lib/hostd/pools/default/docs', label: "managed folder 'docs'" },
      { path: '/srv/share', label: 'lxc.mount_roots' },
    ],
    poolRoots: ['/pools/a', '/var/lib/hostd/pools/default'],
    private: [
      { path: '/var/lib/hostd', label: 'data directory' },
      { path: '/srv/lxc', label: 'LXC path (lxc.lxc_path)' },
    ],
  };
  const judge = (p: string) => {
    const v = judgeHostPath(p, policy);
    return v.ok ? `ok: ${v.root.label}` : `${v.rule}: ${v.reason}`;
  };

  it('allows managed folders, paths inside them and configured roots', () => {
    expect(judge('/pools/a/media')).to.equal("ok: managed folder 'media'");
    expect(judge('/pools/a/media/films/2024')).to.equal("ok: managed folder 'media'");
    expect(judge('/var/lib/hostd/pools/default/docs')).to.equal("ok: managed folder 'docs'");
    expect(judge('/srv/share/x')).to.equal('ok: lxc.mount_roots');
  });

  it('refuses pool roots, internal directories of every domain, the data dir and what holds them', () => {
    expect(judge('/pools/a')).to.equal('holds-own: is a storage pool root or holds one (every domain keeps its files there)');
    expect(judge('/pools')).to.equal('holds-own: is a storage pool root or holds one (every domain keeps its files there)');
    expect(judge('/')).to.equal("holds-own: is or holds hostd's data directory");
    for (const d of ['.hostd-apps', '.hostd-lxc', '.vms', '.hostd-trash-f_1-00', '.hostd-copy-ab', '.hostd-future-domain']) {
      expect(judge(`/pools/a/${d}`), d).to.equal(`internal: is inside a directory hostd keeps for itself ('${d}')`);
      expect(judge(`/pools/a/${d}/some/deeper/dir`), d).to.equal(`internal: is inside a directory hostd keeps for itself ('${d}')`);
    }
    // Even inside an allowed root: a folder's own `.hostd-*` entry (a copy in progress) is the daemon's.
    expect(judge('/pools/a/media/.hostd-copy-1')).to.equal("internal: is inside a directory hostd keeps for itself ('.hostd-copy-1')");
    expect(judge('/var/lib/hostd')).to.equal("holds-own: is or holds hostd's data directory");
    expect(judge('/var/lib/hostd/db')).to.equal("private: is inside hostd's data directory");
    expect(judge('/var/lib/hostd/secrets')).to.equal("private: is inside hostd's data directory");
    expect(judge('/srv')).to.equal("holds-own: is or holds hostd's LXC path (lxc.lxc_path)");
    expect(judge('/srv/lxc/svc-lxc-100')).to.equal("private: is inside hostd's LXC path (lxc.lxc_path)");
  });

  it('refuses whatever is not a folder or a configured root', () => {
    for (const p of ['/etc', '/pools/a/plain-dir', '/opt', '/var/lib/hostd/pools/default/not-a-folder', '/pools/a/mediax']) {
      expect(judge(p), p).to.equal('outside: is neither a managed folder nor inside one, nor inside a configured root');
    }
  });
});

describe('host paths: LXC mount points on a real filesystem', () => {
  let tmp: string;
  let pool: string;
  let folder: string;
  let dataDir: string;
  let outside: string;
  const policyNow = () =>
    mountPolicy({
      folders: [{ folder_id: 'f1', name: 'media', storage_id: 'p', path: folder }],
      mountRoots: [],
      pools: [{ id: 'p', path: pool }],
      dataDir,
      lxcPath: path.join(dataDir, 'lxc'),
    });

  beforeEach(() => {
    tmp = fs.realpathSync(fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-lxc-paths-')));
    pool = path.join(tmp, 'pool');
    folder = path.join(pool, 'media');
    dataDir = path.join(tmp, 'data');
    outside = path.join(tmp, 'outside');
    for (const d of [folder, path.join(pool, '.hostd-apps', 'app1'), path.join(pool, '.vms'), dataDir, outside]) fs.mkdirSync(d, { recursive: true });
  });
  afterEach(() => fs.rmSync(tmp, { recursive: true, force: true }));

  const mp = (host_path: string) => [{ host_path, container_path: '/mnt/x', read_only: true }];

  it('stores the real path of an allowed folder and refuses every way out with 400 naming the rule', async () => {
    // `..` is resolved on the real path: through a missing component it does not exist.
    expect(await refusal(checkNewMounts(mp(`${folder}/sub/..`), await policyNow()))).to.deep.equal({
      status: 400,
      message: "argument 'mount_points[0].host_path' does not exist on the host",
    });
    fs.mkdirSync(path.join(folder, 'sub'));
    expect((await checkNewMounts(mp(`${folder}/sub/..`), await policyNow()))[0].host_path).to.equal(folder);
    expect((await checkNewMounts(mp(folder), await policyNow()))[0].host_path).to.equal(folder);
    fs.symlinkSync(folder, path.join(outside, 'to-media'));
    // A link from outside to a folder is judged by where it leads, and stored as that.
    expect((await checkNewMounts(mp(path.join(outside, 'to-media')), await policyNow()))[0].host_path).to.equal(folder);
    fs.symlinkSync(path.join(pool, '.hostd-apps'), path.join(folder, 'apps-link'));
    const cases: Array<[string, string]> = [
      [pool, 'is a storage pool root or holds one (every domain keeps its files there)'],
      [path.join(pool, '.hostd-apps'), "is inside a directory hostd keeps for itself ('.hostd-apps')"],
      [path.join(pool, '.vms'), "is inside a directory hostd keeps for itself ('.vms')"],
      [path.join(folder, '..', '.hostd-apps', 'app1'), "is inside a directory hostd keeps for itself ('.hostd-apps')"],
      [path.join(folder, 'apps-link'), "is inside a directory hostd keeps for itself ('.hostd-apps')"],
      [outside, 'is neither a managed folder nor inside one, nor inside a configured root'],
      [dataDir, "is or holds hostd's data directory"],
    ];
    for (const [p, why] of cases) {
      expect(await refusal(checkNewMounts(mp(p), await policyNow())), p).to.deep.equal({
        status: 400,
        message: `argument 'mount_points[0].host_path' ${why}: ${MOUNT_RULE}`,
      });
    }
    expect(await refusal(checkNewMounts(mp(path.join(tmp, 'nope')), await policyNow()))).to.deep.equal({
      status: 400,
      message: "argument 'mount_points[0].host_path' does not exist on the host",
    });
  });

  it('a mount allowed at create breaks the rule once its folder is renamed, deleted or swapped for a symlink', async () => {
    const [m] = await checkNewMounts(mp(folder), await policyNow());
    expect(await mountViolation(m, await policyNow())).to.equal(null);
    fs.renameSync(folder, folder + '-old');
    fs.symlinkSync('/etc', folder);
    expect(await mountViolation(m, await policyNow())).to.equal(
      `mount point /mnt/x: its host path ${folder} now resolves elsewhere (a component was replaced by a symlink)`,
    );
    fs.rmSync(folder);
    expect(await mountViolation(m, await policyNow())).to.equal(`mount point /mnt/x: its host path ${folder} no longer exists`);
    // The folder is gone from the folders domain, its directory still there: no longer shared storage.
    fs.renameSync(folder + '-old', folder);
    const noFolders = await mountPolicy({ folders: [], mountRoots: [], pools: [{ id: 'p', path: pool }], dataDir, lxcPath: path.join(dataDir, 'lxc') });
    expect(await mountViolation(m, noFolders)).to.equal(
      `mount point /mnt/x: its host path ${folder} is neither a managed folder nor inside one, nor inside a configured root`,
    );
  });

  it('a record made before the rules breaks them: privileged while the setting is off, a mount into another domain', async () => {
    const rec = {
      lxcid: 7,
      privileged: true,
      mount_points: [{ host_path: path.join(pool, '.hostd-apps'), container_path: '/mnt/apps', read_only: true }],
    } as ContainerRecord;
    const v = await violations(rec, await policyNow(), false);
    expect(v).to.deep.equal([
      { rule: 'lxc.allow_privileged', message: 'container 7 is privileged and lxc.allow_privileged is false (a privileged container is root on the host)' },
      {
        rule: 'mount_points',
        container_path: '/mnt/apps',
        message: `mount point /mnt/apps: its host path ${path.join(pool, '.hostd-apps')} is inside a directory hostd keeps for itself ('.hostd-apps'): ${MOUNT_RULE}`,
      },
    ]);
    expect(await violations({ ...rec, mount_points: [] }, await policyNow(), true)).to.deep.equal([]);
  });

  it('roots that do not exist allow (and protect) nothing', async () => {
    expect(await realRoots([{ path: path.join(tmp, 'missing') }, { path: pool }])).to.deep.equal([{ path: pool }]);
  });
});
