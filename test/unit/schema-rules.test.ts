/**
 * api/registry/schema.ts, the argument rules: addresses, prefixes, DNS names,
 * resource names, image and ISO ids, container paths and interface names,
 * each one rule for every domain, validated the way dispatch validates
 * (api/validate.ts) and refused with the same 400 wherever they are used. The
 * checks a schema cannot state (a gateway inside the subnet, a container path
 * that is not the root) are here too.
 */
import { expect } from 'chai';
import net from 'node:net';
import addFormatsModule from 'ajv-formats';
import { Ajv } from 'ajv';
import {
  PATTERNS,
  bridgeName,
  checkGateway,
  cidr,
  containerPath,
  dnsLabel,
  dnsName,
  dnsServers,
  emptyOr,
  gatewayProblem,
  hostOrIp,
  imageId,
  ipAddress,
  ipv4,
  ipv6,
  isoId,
  normalContainerPath,
  nullable,
  resourceName,
  withPrefix,
} from '../../api/registry/schema.js';
import type { JsonSchema, Operation } from '../../api/registry/types.js';
import { precompile, validateArgs } from '../../api/validate.js';
import { operations } from '../../api/registry/index.js';
import { ApiError } from '../../daemon/lib/errors.js';
import { sampleValue } from '../helpers/conformance.js';

let ops = 0;
/** An operation taking one argument `arg` of this schema (enough for validateArgs, which compiles once per operation name). */
function opWith(schema: JsonSchema, arg = 'value'): Operation {
  return { name: `t_${++ops}_${arg}`, schema: { type: 'object', properties: { [arg]: schema }, additionalProperties: false } } as unknown as Operation;
}

/** The 400 message for `value`, or null when it is accepted. */
function refusal(schema: JsonSchema, value: unknown, arg = 'value'): string | null {
  try {
    validateArgs(opWith(schema, arg), { [arg]: value });
    return null;
  } catch (err) {
    expect(err).to.be.instanceOf(ApiError);
    expect((err as ApiError).status).to.equal(400);
    return (err as ApiError).message;
  }
}

const accepts = (schema: JsonSchema, value: unknown) => refusal(schema, value) === null;

/** Every way an address can be written or miswritten that the tests below look at. */
const ADDRESSES = [
  '1.2.3.4',
  '0.0.0.0',
  '255.255.255.255',
  '127.0.0.1',
  '256.1.1.1',
  '01.2.3.4',
  '1.2.3.04',
  '1.2.3',
  '1.2.3.4.5',
  ' 1.2.3.4',
  '1.2.3.4 ',
  '1.2.3.4\n',
  '::',
  '::1',
  '1::',
  '1:2:3:4:5:6:7:8',
  '1:2:3:4:5:6:7:8:9',
  '1:2:3:4:5:6:7::',
  '::2:3:4:5:6:7:8',
  '1::8',
  'fe80::1',
  'FE80::A:b',
  '2001:db8::',
  '::ffff:1.2.3.4',
  '::ffff:01.2.3.4',
  '1:2:3:4:5:6:1.2.3.4',
  '1:2:3:4:5:6:7:1.2.3.4',
  ':::',
  '1:::2',
  '12345::',
  'g::1',
  '1::2::3',
  'fe80::1%eth0',
  '[::1]',
  '::1/128',
  '1.2.3.4/24',
  '',
  'localhost',
  'example.test',
];

describe('argument rules (api/registry/schema.ts)', () => {
  it("every operation's argument schema compiles (the daemon compiles each on its first call, not at start)", () => {
    expect(() => precompile(operations)).to.not.throw();
  });

  describe('addresses', () => {
    it('ipv4 and ipv6 accept exactly what Node accepts, minus zone ids (and so do the patterns alone)', () => {
      for (const a of ADDRESSES) {
        const node = net.isIP(a);
        const zone = a.includes('%');
        expect(accepts(ipv4(), a), `ipv4 ${JSON.stringify(a)}`).to.equal(node === 4);
        expect(accepts(ipv6(), a), `ipv6 ${JSON.stringify(a)}`).to.equal(node === 6 && !zone);
        expect(accepts(ipAddress(), a), `ipAddress ${JSON.stringify(a)}`).to.equal(node !== 0 && !zone);
        expect(new RegExp(PATTERNS.ipv4, 'u').test(a), `ipv4 pattern ${JSON.stringify(a)}`).to.equal(node === 4);
        expect(new RegExp(PATTERNS.ipv6, 'u').test(a), `ipv6 pattern ${JSON.stringify(a)}`).to.equal(node === 6 && !zone);
      }
    });

    it('the IPv6 pattern agrees with ajv-formats on every compressed form of eight groups', () => {
      const ajv = new Ajv();
      (addFormatsModule as unknown as (a: Ajv) => Ajv)(ajv);
      const fmt = ajv.compile({ type: 'string', format: 'ipv6' });
      const re = new RegExp(PATTERNS.ipv6, 'u');
      const groups = ['1', 'ab', 'f00d', '0', 'FFFF', '12', '3', 'c'];
      let n = 0;
      for (let start = 0; start <= 8; start++) {
        for (let len = 0; start + len <= 8; len++) {
          const left = groups.slice(0, start).join(':');
          const right = groups.slice(start + len).join(':');
          const text = len === 0 ? groups.join(':') : `${left}::${right}`;
          n++;
          expect(re.test(text), text).to.equal(fmt(text) as boolean);
          expect(re.test(text), text).to.equal(net.isIPv6(text));
        }
      }
      expect(n).to.be.greaterThan(40);
    });

    it('the 400 says what an address must be, in every operation alike (only the argument name differs)', () => {
      expect(refusal(ipAddress(), '10.0.0.256', 'gateway')).to.equal("argument 'gateway' must be an IPv4 or IPv6 address");
      expect(refusal(ipAddress(), '10.0.0.256', 'vip')).to.equal("argument 'vip' must be an IPv4 or IPv6 address");
      expect(refusal(ipv4(), '::1', 'vip')).to.equal("argument 'vip' must be an IPv4 address");
      expect(refusal(ipv6(), 'fe80::1%eth0', 'vip6')).to.equal("argument 'vip6' must be an IPv6 address");
      expect(refusal(ipAddress(), 42, 'gateway')).to.equal("argument 'gateway' must be string");
    });

    it('cidr: an address with an optional prefix of 1-32 (IPv4) or 1-128 (IPv6)', () => {
      for (const ok of ['10.0.0.5', '10.0.0.5/24', '10.0.0.5/1', '10.0.0.5/32', 'fd00::5', 'fd00::5/64', 'fd00::5/128', '::ffff:1.2.3.4/96']) {
        expect(accepts(cidr(), ok), ok).to.equal(true);
      }
      for (const bad of [
        '10.0.0.5/0',
        '10.0.0.5/33',
        '10.0.0.5/024',
        'fd00::5/0',
        'fd00::5/129',
        '10.0.0.5/',
        '/24',
        '10.0.0.256/24',
        'fe80::1%eth0/64',
        '10.0.0.5 /24',
        'fd00::5/64/1',
      ]) {
        expect(refusal(cidr(), bad, 'ip_address'), bad).to.equal(
          "argument 'ip_address' must be an IPv4 or IPv6 address with an optional /prefix (1-32 or 1-128)",
        );
      }
      expect(withPrefix('10.0.0.5')).to.equal('10.0.0.5/24');
      expect(withPrefix('fd00::5')).to.equal('fd00::5/64');
      expect(withPrefix('10.0.0.5/16')).to.equal('10.0.0.5/16');
    });

    it('the gateway must be of the address family and inside its subnet; an IPv6 gateway may be link-local', () => {
      expect(gatewayProblem('192.168.1.1', '192.168.1.10/24')).to.equal(null);
      expect(gatewayProblem('192.168.1.1', '192.168.1.10')).to.equal(null);
      expect(gatewayProblem('192.168.2.1', '192.168.1.10/24')).to.equal('is outside 192.168.1.10/24');
      expect(gatewayProblem('192.168.2.1', '192.168.1.10/16')).to.equal(null);
      expect(gatewayProblem('fd00::1', '192.168.1.10/24')).to.equal('is an IPv6 address and the address is IPv4');
      expect(gatewayProblem('fd00::1', 'fd00::10')).to.equal(null);
      expect(gatewayProblem('fe80::1', 'fd00::10/64')).to.equal(null);
      expect(gatewayProblem('fd01::1', 'fd00::10/64')).to.equal('is outside fd00::10/64 (and not link-local)');
      expect(() => checkGateway('10.1.0.1', '10.0.0.2/24')).to.throw(ApiError, "argument 'gateway' is outside 10.0.0.2/24");
      expect(checkGateway('10.0.0.1', '10.0.0.2/24')).to.equal('10.0.0.1');
    });

    it('dnsServers: at most 8 addresses', () => {
      expect(accepts(dnsServers(), ['1.1.1.1', '2606:4700:4700::1111'])).to.equal(true);
      expect(refusal(dnsServers(), ['1.1.1.1', 'dns.example'], 'dns_servers')).to.equal("argument 'dns_servers[1]' must be an IPv4 or IPv6 address");
      expect(refusal(dnsServers(), Array(9).fill('1.1.1.1'), 'dns_servers')).to.equal("argument 'dns_servers' takes at most 8 items");
    });

    it('emptyOr and nullable keep the rule and say so ("empty clears", "null keeps")', () => {
      const s = nullable(emptyOr(ipAddress()));
      for (const ok of ['', null, '10.0.0.1', '::1']) expect(accepts(s, ok), String(ok)).to.equal(true);
      expect(refusal(s, 'nope', 'gateway')).to.equal("argument 'gateway' must be an IPv4 or IPv6 address, or empty, or null");
      expect(refusal(s, 5, 'gateway')).to.equal("argument 'gateway' must be string or null");
    });
  });

  describe('DNS names', () => {
    it('dnsLabel: letters, digits and inner hyphens, 1-63', () => {
      for (const ok of ['a', 'www', 'WWW', 'a-b', 'x'.repeat(63), '0']) expect(accepts(dnsLabel(), ok), ok).to.equal(true);
      for (const bad of ['', '-a', 'a-', 'a.b', 'a_b', 'x'.repeat(64), 'ä']) expect(accepts(dnsLabel(), bad), bad).to.equal(false);
      expect(refusal(dnsLabel(), 'a_b', 'subdomain')).to.equal(
        "argument 'subdomain' must be one DNS label (letters, digits and inner hyphens, 1-63 characters)",
      );
    });

    it('dnsName: labels joined by dots, at least minLabels, at most 253 characters, no trailing dot', () => {
      const two = dnsName(undefined, { minLabels: 2 });
      for (const ok of ['home.example', 'a.b.c', 'Home.Example']) expect(accepts(two, ok), ok).to.equal(true);
      for (const bad of [
        'example',
        'home.example.',
        '.home.example',
        'home..example',
        'home_x.example',
        `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(62)}`,
      ]) {
        expect(accepts(two, bad), bad).to.equal(false);
      }
      expect(accepts(two, `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`), '253 characters').to.equal(true);
      expect(accepts(dnsName(), 'localhost')).to.equal(true);
      expect(refusal(two, 'example', 'name')).to.equal(
        "argument 'name' must be a DNS name of at least 2 labels (letters, digits and inner hyphens, 1-63 characters per label, 253 in all)",
      );
    });

    it('hostOrIp: an IP address or a DNS name', () => {
      for (const ok of ['10.0.0.1', '::1', 'db', 'db.internal']) expect(accepts(hostOrIp(), ok), ok).to.equal(true);
      for (const bad of ['', 'db.', 'db internal', 'fe80::1%eth0', 'http://db'])
        expect(refusal(hostOrIp(), bad, 'host'), bad).to.equal("argument 'host' must be an IP address or a DNS name");
    });
  });

  describe('names and ids', () => {
    const name = resourceName();
    it('resourceName counts code points: 128 emoji (256 UTF-16 units) fit, 129 do not', () => {
      expect(accepts(name, '😀'.repeat(128))).to.equal(true);
      expect(refusal(name, '😀'.repeat(129), 'name')).to.equal("argument 'name' must be at most 128 characters");
      expect(accepts(resourceName(undefined, { max: 3 }), 'abc')).to.equal(true);
      expect(accepts(resourceName(undefined, { max: 3 }), 'abcd')).to.equal(false);
    });

    it('resourceName allows spaces, uppercase and any script inside; refuses controls, slashes, edge spaces, . and .., lone surrogates', () => {
      for (const ok of ['web', 'Web Server 1', 'Ω-node', 'a.b', '...', 'x', 'My VM (test)']) expect(accepts(name, ok), ok).to.equal(true);
      const bad = ['', ' web', 'web ', '\tweb', 'we\nb', 'we\u0000b', 'we\u007fb', 'we\u0085b', 'we\u009bb', 'a/b', 'a\\b', '.', '..', 'a\uD800b', '\uDC00'];
      for (const b of bad) expect(accepts(name, b), JSON.stringify(b)).to.equal(false);
      expect(refusal(name, 'a/b', 'name')).to.equal(
        "argument 'name' must be a name of 1-128 characters without control characters, '/' or '\\', with no space at either end, not '.' or '..'",
      );
      expect(refusal(name, '..', 'name')).to.equal(refusal(name, 'a/b', 'name'));
    });

    it("resourceName with a reserved prefix refuses it in any case (LXC's svc-lxc-)", () => {
      const lxc = resourceName(undefined, { reservedPrefix: 'svc-lxc-' });
      expect(accepts(lxc, 'svc-lxc')).to.equal(true);
      expect(accepts(lxc, 'my svc-lxc-1')).to.equal(true);
      for (const bad of ['svc-lxc-1', 'SVC-LXC-1', 'Svc-Lxc-']) {
        expect(refusal(lxc, bad, 'new_name'), bad).to.equal(
          "argument 'new_name' must be a name of 1-128 characters without control characters, '/' or '\\', with no space at either end, not '.' or '..', not starting with 'svc-lxc-'",
        );
      }
    });

    it("imageId: 1-64 of [A-Za-z0-9_.-], a letter or digit first, no '..'", () => {
      for (const ok of ['debian-12', 'a', 'A_b.c-d', 'img.', 'x'.repeat(64), 'debian-bookworm-amd64-default'])
        expect(accepts(imageId(), ok), ok).to.equal(true);
      for (const bad of ['', '.a', '-a', 'a..b', 'x'.repeat(65), 'a/b', 'a b', 'a:b', 'ä']) expect(accepts(imageId(), bad), bad).to.equal(false);
      expect(refusal(imageId(), 'a..b', 'image_id')).to.equal(
        "argument 'image_id' must be 1-64 of [A-Za-z0-9_.-], starting with a letter or digit, without '..'",
      );
    });

    it("isoId: 1-128 of [A-Za-z0-9_.+-], a letter or digit first, no '..'", () => {
      for (const ok of ['debian-12.7.0-amd64-netinst.iso', 'a+b', 'x'.repeat(128)]) expect(accepts(isoId(), ok), ok).to.equal(true);
      for (const bad of ['', '+a', 'a..iso', 'x'.repeat(129), 'a/b']) expect(accepts(isoId(), bad), bad).to.equal(false);
    });

    it("bridgeName: 1-15 of [A-Za-z0-9_.-], not '.' or '..'", () => {
      for (const ok of ['br0', 'vmbr0', 'lxcbr0.10', 'x'.repeat(15)]) expect(accepts(bridgeName(), ok), ok).to.equal(true);
      for (const bad of ['', '.', '..', 'x'.repeat(16), 'br 0', 'br/0', 'br:0']) expect(accepts(bridgeName(), bad), bad).to.equal(false);
    });
  });

  describe('container paths', () => {
    it("absolute, no control character, ':' or ',', no '..' segment, at most 4096 characters", () => {
      for (const ok of ['/data', '/srv/my data', '/a/./b', '//a//b/', '/...', '/.hidden', '/a/..b', '/a/b..', '/'])
        expect(accepts(containerPath(), ok), ok).to.equal(true);
      const bad = ['', 'data', './data', '/a/../b', '/..', '/a/..', '/a:b', '/a,b', '/a\nb', '/a\u0000', `/${'x'.repeat(4096)}`];
      for (const b of bad) expect(accepts(containerPath(), b), JSON.stringify(b)).to.equal(false);
      expect(refusal(containerPath(), '/a/../etc', 'container_path')).to.equal(
        "argument 'container_path' must be an absolute path inside the container, without control characters, ':', ',' or '..' segments",
      );
    });

    it('normalised by normalContainerPath, which refuses the root', () => {
      expect(normalContainerPath('//a/./b/', 'container_path')).to.equal('/a/b');
      expect(normalContainerPath('/srv/data', 'container_path')).to.equal('/srv/data');
      for (const root of ['/', '//', '/./', '/.'])
        expect(() => normalContainerPath(root, 'container_path'), root).to.throw(ApiError, "argument 'container_path' must not be the container's root");
    });
  });

  describe('what clients read from these schemas', () => {
    const all: Array<[string, JsonSchema]> = [
      ['ipv4', ipv4()],
      ['ipv6', ipv6()],
      ['ipAddress', ipAddress()],
      ['cidr', cidr()],
      ['dnsLabel', dnsLabel()],
      ['dnsName', dnsName()],
      ['dnsName2', dnsName(undefined, { minLabels: 2 })],
      ['hostOrIp', hostOrIp()],
      ['resourceName', resourceName(undefined, { reservedPrefix: 'svc-lxc-' })],
      ['imageId', imageId()],
      ['isoId', isoId()],
      ['containerPath', containerPath()],
      ['bridgeName', bridgeName()],
      ['emptyOr', emptyOr(ipAddress())],
      ['nullable', nullable(emptyOr(cidr()))],
    ];

    it('each rule gives words for its 400 and an example that it accepts, which is what the conformance walk sends', () => {
      for (const [n, s] of all) {
        expect(s['x-expect'], n).to.be.a('string');
        const sample = sampleValue(s);
        expect(sample, n).to.equal((s.examples as unknown[])[0]);
        expect(accepts(s, sample), `${n} example ${String(sample)}`).to.equal(true);
      }
    });

    it('examples are loopback addresses and .test names: a test that sends them reaches nothing off the machine', () => {
      for (const [n, s] of all) {
        const ex = String((s.examples as unknown[])[0]).split('/')[0];
        if (net.isIP(ex)) expect(['127.0.0.1', '127.0.0.2', '::1'], n).to.include(ex);
      }
      expect(dnsName().examples).to.deep.equal(['example.test']);
    });

    it('patterns use no lookaround (validators of other languages run them)', () => {
      const patterns: string[] = [];
      const walk = (v: unknown) => {
        if (Array.isArray(v)) v.forEach(walk);
        else if (v && typeof v === 'object') for (const [k, x] of Object.entries(v)) k === 'pattern' ? patterns.push(String(x)) : walk(x);
      };
      for (const [, s] of all) walk(s);
      expect(patterns.length).to.be.greaterThan(15);
      for (const p of patterns) expect(/\(\?<?[=!]/.test(p), p.slice(0, 80)).to.equal(false);
    });
  });
});
