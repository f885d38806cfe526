/**
 * The lxc: section of the config file: defaults, every key, and the values
 * that stop the daemon at start (naming the key), mount roots that would
 * overlap what hostd keeps included.
 */
import { expect } from 'chai';
import { parseSettings } from '../../../daemon/lxc/settings.js';

const err = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('did not throw');
};

describe('lxc settings', () => {
  const cfg = {
    dataDir: '/var/lib/hostd',
    pools: [
      { id: 'a', path: '/a' },
      { id: 'b', path: '/b' },
    ],
  };
  it('defaults', () => {
    expect(parseSettings(undefined, cfg)).to.deep.equal({
      lxcPath: '/var/lib/hostd/lxc',
      imageServer: null,
      defaultBridge: null,
      defaultStorage: 'a',
      imageStorage: 'a',
      mountRoots: [],
      allowPrivileged: false,
      firstLxcid: 100,
      stopTimeoutSeconds: 30,
      defaultCpuCores: 1,
      defaultMemoryMb: 512,
      idmap: null,
    });
  });
  it('reads every key', () => {
    const s = parseSettings(
      {
        image_server: 'http://x:1/img',
        default_bridge: 'br0',
        default_storage: 'b',
        image_storage: 'b',
        mount_roots: ['/srv/m/'],
        first_lxcid: 200,
        idmap: { uid_start: 200000, gid_start: 300000 },
      },
      cfg,
    );
    expect(s).to.include({ imageServer: 'http://x:1/img/', defaultBridge: 'br0', defaultStorage: 'b', imageStorage: 'b', firstLxcid: 200 });
    expect(s.mountRoots).to.deep.equal(['/srv/m']);
    expect(s.idmap).to.deep.equal({ uid: 200000, gid: 300000, count: 65536 });
  });
  it('refuses unknown keys, bad pools, / as a mount root and a bad URL', () => {
    expect(err(() => parseSettings({ nope: 1 }, cfg))).to.match(/^config lxc\.nope is not a known key/);
    expect(err(() => parseSettings({ default_storage: 'z' }, cfg))).to.equal('config lxc.default_storage must name a storage pool (a, b)');
    expect(err(() => parseSettings({ mount_roots: ['/'] }, cfg))).to.equal('config lxc.mount_roots must not contain / (that would allow every host path)');
    expect(err(() => parseSettings({ image_server: 'ftp://x' }, cfg))).to.equal('config lxc.image_server must be an http or https URL');
    expect(err(() => parseSettings({ allow_privileged: 'yes' }, cfg))).to.equal('config lxc.allow_privileged must be true or false');
    expect(parseSettings({ allow_privileged: true }, cfg).allowPrivileged).to.equal(true);
  });
  it('refuses a mount root at or above a pool root, in an internal directory, or at, above or inside the data dir or the lxc path, naming the key', () => {
    const c = { dataDir: '/var/lib/hostd', pools: [{ id: 'a', path: '/srv/pool-a' }] };
    for (const bad of [
      '/srv/pool-a',
      '/srv',
      '/srv/pool-a/.hostd-lxc',
      '/mnt/x/.hostd-apps/y',
      '/var/lib/hostd',
      '/var/lib',
      '/var/lib/hostd/certs',
      '/opt/lxc/c1',
    ]) {
      const msg = err(() => parseSettings({ mount_roots: [bad], lxc_path: '/opt/lxc' }, c));
      expect(msg, bad).to.match(
        new RegExp(`^config lxc\\.mount_roots entry ${bad.replace(/[.]/g, '\\.')} .+; a mount root may hold only what containers may mount$`),
      );
    }
    // A plain directory in a pool is no pool root: mount points below it are still judged by the rule.
    expect(parseSettings({ mount_roots: ['/srv/media', '/mnt/x', '/srv/pool-a/media'], lxc_path: '/opt/lxc' }, c).mountRoots).to.deep.equal([
      '/srv/media',
      '/mnt/x',
      '/srv/pool-a/media',
    ]);
  });
});
