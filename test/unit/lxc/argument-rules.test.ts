/**
 * LXC's arguments under the registry's shared rules (names, image ids,
 * addresses, bridges, container paths, disk sizes), validated as dispatch
 * validates them, and the domain's own checks beside them (environment,
 * default image ids, MACs).
 */
import { expect } from 'chai';
import { getOperation } from '../../../api/registry/index.js';
import { checkGateway, normalContainerPath, withPrefix } from '../../../api/registry/schema.js';
import { validateArgs } from '../../../api/validate.js';
import { checkEnvironment } from '../../../daemon/lxc/create.js';
import { imageIdFromName, randomHwaddr } from '../../../daemon/lxc/naming.js';

const err = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('did not throw');
};

describe('lxc argument rules', () => {
  /** The 400 dispatch answers for these arguments of `op` (the registry's schema), or null when they pass. */
  const refusal = (op: string, args: Record<string, unknown>): string | null => {
    try {
      validateArgs(getOperation(op)!, args);
      return null;
    } catch (e) {
      return (e as Error).message;
    }
  };
  const create = (args: Record<string, unknown>) => refusal('lxc_create', { name: 'box', template: 'busybox', ...args });

  it("names: the registry's resource-name rule with LXC's reserved prefix, for name and new_name", () => {
    const rule =
      "must be a name of 1-128 characters without control characters, '/' or '\\', with no space at either end, not '.' or '..', not starting with 'svc-lxc-'";
    expect(create({ name: 'My Box 1' })).to.equal(null);
    expect(create({ name: 'x'.repeat(128) })).to.equal(null);
    expect(create({ name: 'svc-lx' })).to.equal(null);
    expect(refusal('lxc_update', { id: 1, new_name: null })).to.equal(null);
    expect(refusal('lxc_update', { id: 1, new_name: 'x'.repeat(129) })).to.equal("argument 'new_name' must be at most 128 characters");
    expect(refusal('lxc_update', { id: 1, new_name: 'svc-lxc-1' })).to.equal(`argument 'new_name' ${rule}, or null`);
    expect(create({ name: '' })).to.equal("argument 'name' must not be empty");
    for (const bad of ['a\rb', 'a\tb', 'a\\b', 'a/b', '.', '..', 'Svc-Lxc-x', ' x']) {
      expect(create({ name: bad }), JSON.stringify(bad)).to.equal(`argument 'name' ${rule}`);
    }
  });
  it('addresses: CIDR with default prefixes, gateway in the subnet', () => {
    expect(create({ ip_address: '10.0.0.5/16', gateway: '10.0.1.1' })).to.equal(null);
    expect(create({ ip_address: '', gateway: '' })).to.equal(null);
    expect(create({ ip_address: '10.0.0.5/33' })).to.match(/^argument 'ip_address' must be/);
    expect(create({ ip_address: ' 10.0.0.5' })).to.match(/^argument 'ip_address' must be/);
    expect(create({ gateway: '10.0.0.01' })).to.match(/^argument 'gateway' must be/);
    expect(withPrefix('10.0.0.5')).to.equal('10.0.0.5/24');
    expect(withPrefix('10.0.0.5/16')).to.equal('10.0.0.5/16');
    expect(withPrefix('fd00::5')).to.equal('fd00::5/64');
    expect(checkGateway('10.0.1.1', '10.0.0.5/16')).to.equal('10.0.1.1');
    expect(err(() => checkGateway('10.1.0.1', '10.0.0.5/16'))).to.equal("argument 'gateway' is outside 10.0.0.5/16");
    expect(err(() => checkGateway('fd00::1', '10.0.0.5/16'))).to.equal("argument 'gateway' is an IPv6 address and the address is IPv4");
    expect(err(() => checkGateway('fd01::1', 'fd00::5/64'))).to.equal("argument 'gateway' is outside fd00::5/64 (and not link-local)");
  });
  it('environment, image ids, container paths, disk sizes, MACs', () => {
    expect(checkEnvironment({ A_1: 'x y' })).to.deep.equal({ A_1: 'x y' });
    expect(err(() => checkEnvironment({ A: 'x\ny' }))).to.equal("argument 'environment' has a value with a newline or NUL byte");
    expect(err(() => checkEnvironment({ 'A-B': 'x' }))).to.equal("argument 'environment' has a variable name that is not [A-Za-z_][A-Za-z0-9_]*");
    expect(create({ template: 'debian-12_x.1' })).to.equal(null);
    for (const bad of ['../x', 'a..b', '-x']) {
      expect(create({ template: bad }), bad).to.match(/^argument 'template' must be 1-64 of/);
      expect(refusal('lxc_template_create', { id: 1, image_id: bad }), bad).to.match(/^argument 'image_id' must be 1-64 of/);
    }
    expect(create({ template: 'x'.repeat(65) })).to.equal("argument 'template' must be at most 64 characters");
    expect(imageIdFromName('My Web/Box!', 7)).to.equal('My-Web-Box');
    expect(imageIdFromName('!!!', 7)).to.equal('lxc-7');
    expect(imageIdFromName('a..b', 7)).to.equal('a.b');
    const mount = (container_path: string) => create({ mount_points: [{ host_path: '/srv/x', container_path, read_only: false }] });
    expect(mount('/mnt//data/./x/')).to.equal(null);
    expect(normalContainerPath('/mnt//data/./x/', 'c')).to.equal('/mnt/data/x');
    expect(mount('/mnt/../etc')).to.match(/^argument 'mount_points\/0\/container_path' must be|^argument 'mount_points\[0\]\.container_path' must be/);
    expect(mount('mnt')).to.not.equal(null);
    expect(mount('/a:b')).to.not.equal(null);
    expect(err(() => normalContainerPath('/', 'c'))).to.equal("argument 'c' must not be the container's root");
    expect(create({ disk_size_bytes: 0 })).to.equal(null);
    expect(create({ disk_size_bytes: 32 * 1024 * 1024 })).to.equal(null);
    expect(create({ disk_size_bytes: 1024 })).to.match(/^argument 'disk_size_bytes' must be 0 or at least 33554432/);
    expect(randomHwaddr(Buffer.from([1, 0xab, 255]))).to.equal('00:16:3e:01:ab:ff');
  });
});
