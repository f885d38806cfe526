/** Pure parts of the locations domain: addresses, credentials, the registry's argument rules, SMB failures, mount table, settings, discovery packets. */
import { expect } from 'chai';
import { getOperation } from '../../../api/registry/index.js';
import { validateArgs } from '../../../api/validate.js';
import { nameRule, parseCredentials, parseRemote, remoteRuleProblem, scrub } from '../../../daemon/locations/addresses.js';
import { classifySmbclient, parseShareList, smbError } from '../../../daemon/locations/smb/status.js';
import { parseMountinfo } from '../../../daemon/locations/smb/mounts.js';
import { smbnetfsConfig, smbnetfsQuote } from '../../../daemon/locations/smb/smbnetfs.js';
import { classifyMountError, cifsCredentialsFile } from '../../../daemon/locations/smb/cifs.js';
import {
  broadcastOf,
  encodeName,
  nodeStatusQuery,
  parseNodeStatus,
  responseInfo,
  serverOf,
  wildcardQuery,
} from '../../../daemon/locations/smb/discovery/netbios.js';
import { parseMessage, ptrQuery, smbHostsOf } from '../../../daemon/locations/smb/discovery/mdns.js';
import { parseProbeMatches, probe } from '../../../daemon/locations/smb/discovery/wsd.js';
import { parseSettings } from '../../../daemon/locations/settings.js';
import { rejectsApi } from '../../helpers/expect.js';

/** The 400 the dispatcher gives when `args` do not fit the operation's schema (checked before the service runs). */
const schemaCheck = (op: string, args: Record<string, unknown>) => (async () => validateArgs(getOperation(op)!, args))();

describe('locations: remote addresses and credentials', () => {
  it('accepts //host/share, host/share, \\\\host\\share and smb://host/share', () => {
    for (const s of ['//nas/media', 'nas/media', '\\\\nas\\media', 'smb://nas/media', '//nas/media/']) {
      expect(parseRemote(s)).to.deep.equal({ host: 'nas', share: 'media' });
    }
    expect(parseRemote('//10.0.0.5/Backup$')).to.deep.equal({ host: '10.0.0.5', share: 'Backup$' });
  });

  it('refuses anything else, naming the argument', async () => {
    const cases: Array<[unknown, string]> = [
      ['', "argument 'remote' must be a share address of the form //<host>/<share> or <host>/<share>"],
      ['/srv/x', "argument 'remote' must be //<host>/<share> or <host>/<share>, not a local path"],
      ['//nas', "argument 'remote' must be //<host>/<share> or <host>/<share> (exactly one host and one share name)"],
      ['//nas/a/b', "argument 'remote' must be //<host>/<share> or <host>/<share> (exactly one host and one share name)"],
      ['//na s/a', "argument 'remote' has an invalid host name 'na s' (a DNS or NetBIOS name, or an IPv4 address)"],
      ['//nas/a:b', `argument 'remote' has an invalid share name (it holds ':'; share names are ${nameRule(80)})`],
      ['//nas/..', `argument 'remote' has an invalid share name (it is '..'; share names are ${nameRule(80)})`],
    ];
    for (const [input, msg] of cases) await rejectsApi((async () => parseRemote(input))(), 400, msg);
  });

  it('refuses in share names what mount.cifs, smbclient or smbnetfs read as syntax', async () => {
    const bad = (share: string, why: string) =>
      rejectsApi(
        (async () => parseRemote(`//127.0.0.9/${share}`))(),
        400,
        `argument 'remote' has an invalid share name (${why}; share names are ${nameRule(80)})`,
      );
    // mount.cifs copies the share into the kernel's comma-separated options (unc=\\host\share,...).
    await bad('s,uid=0,password=x', "it holds ','");
    await bad('s,noperm', "it holds ','");
    await bad('s=x', "it holds '='");
    // libsmbclient decodes %XX in smb:// paths; smbnetfs reads user:password@computer in path names.
    await bad('a%2f..', "it holds '%'");
    await bad('u@host', "it holds '@'");
    await bad('d;u', "it holds ';'");
    await bad('a+b', "it holds '+'");
    await bad('[x]', "it holds '['");
    await bad('tab\there', 'it holds a control character');
    await bad('line\nbreak', 'it holds a control character');
    await bad(' lead', 'it has a space at one end');
    await bad('-o', "it starts with '-'");
    await bad('x'.repeat(81), 'it is over 80 characters');
    // What Windows shares are called stays accepted: spaces inside, hidden shares.
    expect(parseRemote('//nas/My Files')).to.deep.equal({ host: 'nas', share: 'My Files' });
    expect(parseRemote('//nas/C$')).to.deep.equal({ host: 'nas', share: 'C$' });
    await rejectsApi(
      (async () => parseRemote('//127.0.0.9,ip=10.0.0.1/s'))(),
      400,
      "argument 'remote' has an invalid host name '127.0.0.9,ip=10.0.0.1' (a DNS or NetBIOS name, or an IPv4 address)",
    );
    await rejectsApi(schemaCheck('locations_discover', { host: 'nas,port=1' }), 400, "argument 'host' must be a DNS or NetBIOS host name or an IPv4 address");
    await rejectsApi(schemaCheck('locations_discover', { host: '-nas' }), 400, "argument 'host' must be a DNS or NetBIOS host name or an IPv4 address");
  });

  it('refuses in user names and domains what becomes a mount option or a password', async () => {
    const user = (u: string, why: string) =>
      rejectsApi((async () => parseCredentials(u, 'pw'))(), 400, `argument 'username' has an invalid user name (${why}; user names are ${nameRule(256)})`);
    await user('bob,uid=0', "it holds ','");
    await user('bob%secret', "it holds '%'");
    await user('bob=x', "it holds '='");
    await user('-bob', "it starts with '-'");
    await rejectsApi(
      (async () => parseCredentials('CORP,sec=none\\bob', 'pw'))(),
      400,
      `argument 'username' has an invalid domain (it holds ','; domains are ${nameRule(256)})`,
    );
    await rejectsApi(
      (async () => parseCredentials('bob@corp%x', 'pw'))(),
      400,
      `argument 'username' has an invalid domain (it holds '%'; domains are ${nameRule(256)})`,
    );
    await rejectsApi(
      schemaCheck('locations_create', { name: 'n', remote: '//nas/s', username: 'bob\nauth "x"', password: 'pw' }),
      400,
      "argument 'username' must be at most 256 characters without control characters",
    );
    // A comma in a password is fine: mount.cifs doubles it, smbnetfs gets it quoted, smbclient on stdin.
    expect(parseCredentials('John Smith', 'a,uid=0')).to.deep.equal({ user: 'John Smith', domain: null, password: 'a,uid=0' });
  });

  it('checks a stored address against the same rule (records made before it)', () => {
    expect(remoteRuleProblem('127.0.0.1', 'guest', null, null)).to.equal(null);
    expect(remoteRuleProblem('nas', 'My Files', 'bob', 'CORP')).to.equal(null);
    expect(remoteRuleProblem('127.0.0.9', 's,uid=0,password=x', null, null)).to.equal(
      `share name 's,uid=0,password=x' is refused (it holds ','; share names are ${nameRule(80)})`,
    );
    expect(remoteRuleProblem('127.0.0.9', 's', 'bob,uid=0', null)).to.equal(`user name 'bob,uid=0' is refused (it holds ','; user names are ${nameRule(256)})`);
    expect(remoteRuleProblem('127.0.0.9', 's', 'bob', 'C,D')).to.equal(`domain 'C,D' is refused (it holds ','; domains are ${nameRule(256)})`);
    expect(remoteRuleProblem('a,b', 's', null, null)).to.equal("host name 'a,b' is refused (a DNS or NetBIOS name, or an IPv4 address)");
  });

  it('reads credentials: guest, user, DOMAIN\\user, user@DOMAIN', async () => {
    expect(parseCredentials(undefined, undefined)).to.equal(null);
    expect(parseCredentials('', '')).to.equal(null);
    expect(parseCredentials('bob', undefined)).to.deep.equal({ user: 'bob', domain: null, password: '' });
    expect(parseCredentials('CORP\\bob', 'pw')).to.deep.equal({ user: 'bob', domain: 'CORP', password: 'pw' });
    expect(parseCredentials('bob@corp.example', 'pw')).to.deep.equal({ user: 'bob', domain: 'corp.example', password: 'pw' });
    await rejectsApi((async () => parseCredentials(undefined, 'pw'))(), 400, "argument 'password' needs 'username' (omit both for guest access)");
    // The message never quotes the password.
    await rejectsApi(
      schemaCheck('locations_create', { name: 'n', remote: '//nas/s', username: 'bob', password: 'line\nbreak' }),
      400,
      "argument 'password' must be at most 1024 characters without control characters",
    );
  });

  it('quotes for smbnetfs and writes the kernel credentials file', () => {
    expect(smbnetfsQuote('a "b" \\c')).to.equal('"a \\"b\\" \\\\c"');
    const conf = smbnetfsConfig({ host: 'nas', share: 'm' }, { user: 'bob', domain: 'CORP', password: 'p"w' }, 5000);
    expect(conf).to.include('config_update_period 0');
    expect(conf).to.include('auth "nas/m" "CORP/bob" "p\\"w"');
    expect(smbnetfsConfig({ host: 'nas', share: 'm' }, null, 5000)).to.include('auth "nas/m" "guest" ""');
    expect(cifsCredentialsFile({ user: 'bob', domain: null, password: 'x' })).to.equal('username=bob\npassword=x\n');
  });
});

describe("locations: the registry's argument rules", () => {
  const NAME_RULE = "argument 'name' must be a name of 1-128 characters without control characters, '/' or '\\', with no space at either end, not '.' or '..'";

  it("a location name follows the house's one name rule", async () => {
    const make = (name: string) => schemaCheck('locations_create', { name, remote: '//nas/s' });
    for (const bad of [' media', 'media ', 'a/b', 'a\\b', '..', 'a\u0085b']) await rejectsApi(make(bad), 400, NAME_RULE);
    await rejectsApi(make(''), 400, "argument 'name' must not be empty");
    await rejectsApi(make('x'.repeat(129)), 400, "argument 'name' must be at most 128 characters");
    // Spaces inside, any script, 128 code points (an emoji is two UTF-16 units).
    for (const good of ['My Files', 'Фото', '\u{1F4C1}'.repeat(128)]) await make(good);
  });

  it("discovery's host and ip: the rule's words, '' taken as omitted, 253 characters at most", async () => {
    await schemaCheck('locations_discover', { host: '', ip: '', username: '', password: '' });
    await schemaCheck('locations_discover', { host: 'nas.example.test', ip: '127.0.0.1' });
    await rejectsApi(schemaCheck('locations_discover', { host: 'n'.repeat(254) }), 400, "argument 'host' must be at most 253 characters");
    await rejectsApi(schemaCheck('locations_discover', { host: 'a..b' }), 400, "argument 'host' must be a DNS or NetBIOS host name or an IPv4 address");
    await rejectsApi(schemaCheck('locations_discover', { host: 'nas', ip: '10.0.0.01' }), 400, "argument 'ip' must be an IPv4 address");
  });
});

describe('locations: SMB failures', () => {
  it('classifies what smbclient prints', () => {
    expect(classifySmbclient('session setup failed: NT_STATUS_LOGON_FAILURE', false)).to.deep.equal({ kind: 'credentials', status: 'NT_STATUS_LOGON_FAILURE' });
    expect(classifySmbclient('tree connect failed: NT_STATUS_ACCESS_DENIED', true)).to.deep.equal({ kind: 'guest-refused', status: 'NT_STATUS_ACCESS_DENIED' });
    expect(classifySmbclient('tree connect failed: NT_STATUS_ACCESS_DENIED', false)).to.deep.equal({ kind: 'denied', status: 'NT_STATUS_ACCESS_DENIED' });
    expect(classifySmbclient('tree connect failed: NT_STATUS_BAD_NETWORK_NAME', false).kind).to.equal('no-share');
    expect(classifySmbclient('do_connect: Connection to 127.0.0.2 failed (Error NT_STATUS_CONNECTION_REFUSED)', true).kind).to.equal('unreachable');
    expect(classifySmbclient('do_connect: Connection to nohost failed (Error NT_STATUS_UNSUCCESSFUL)', true).kind).to.equal('unresolved');
    expect(classifySmbclient('something else', true)).to.deep.equal({ kind: 'other', status: null });
  });

  it('maps them to statuses naming which', () => {
    expect(smbError({ kind: 'credentials', status: 'NT_STATUS_LOGON_FAILURE' }, 'h', 's', '')).to.include({
      status: 400,
      message: "SMB host 'h' rejected the 'username' and 'password' (NT_STATUS_LOGON_FAILURE)",
    });
    expect(smbError({ kind: 'no-share', status: 'NT_STATUS_BAD_NETWORK_NAME' }, 'h', 's', '').status).to.equal(404);
    expect(smbError({ kind: 'unreachable', status: null }, 'h', 's', 'timed out').status).to.equal(502);
    const r = { host: 'h', share: 's' };
    expect(classifyMountError('mount error(13): Permission denied', r, false).status).to.equal(400);
    expect(classifyMountError('mount error(2): No such file or directory', r, false).status).to.equal(404);
    expect(classifyMountError('mount error(113): could not connect to h', r, false).status).to.equal(502);
    expect(classifyMountError('mount error(19): No such device', r, false).status).to.equal(503);
    expect(scrub('x secret y secret', 'secret')).to.equal('x [redacted] y [redacted]');
  });

  it('parses smbclient -L -g', () => {
    const out = 'Disk|guest|\nDisk|private|Team files\nIPC|IPC$|IPC Service (Samba)\nSMB1 disabled -- no workgroup available\n';
    expect(parseShareList(out)).to.deep.equal([
      { name: 'guest', type: 'disk', comment: '' },
      { name: 'private', type: 'disk', comment: 'Team files' },
      { name: 'IPC$', type: 'ipc', comment: 'IPC Service (Samba)' },
    ]);
  });
});

describe('locations: mount table and settings', () => {
  it('parses mountinfo, escapes included', () => {
    const text = '49 27 0:47 / /data/loc\\040x rw,nosuid - fuse.smbnetfs smbnetfs rw,user_id=0\n50 27 0:48 / /mnt/c rw - cifs //nas/m rw,vers=3.1.1\n';
    expect(parseMountinfo(text)).to.deep.equal([
      { mountPoint: '/data/loc x', fsType: 'fuse.smbnetfs', source: 'smbnetfs' },
      { mountPoint: '/mnt/c', fsType: 'cifs', source: '//nas/m' },
    ]);
  });

  it('validates its config section', () => {
    expect(parseSettings(undefined)).to.deep.equal({ mountRoute: 'auto', checkIntervalMs: 30000, checkTimeoutMs: 8000, discoveryTimeoutMs: 3000 });
    expect(() => parseSettings({ mount_route: 'nfs' })).to.throw('locations.mount_route must be auto, cifs or fuse');
    expect(() => parseSettings({ bogus: 1 })).to.throw(/locations.bogus: unknown setting/);
  });
});

describe('locations: discovery packets', () => {
  it('encodes NetBIOS names and queries', () => {
    expect(encodeName('*', 0).subarray(1, 3).toString()).to.equal('CK'); // '*' = 0x2a
    const q = wildcardQuery(0x1234);
    expect(q.readUInt16BE(0)).to.equal(0x1234);
    expect(q.readUInt16BE(2)).to.equal(0x0110);
    expect(q.length).to.equal(12 + 34 + 4);
    expect(nodeStatusQuery(1).readUInt16BE(q.length - 4)).to.equal(0x21);
    expect(broadcastOf('10.231.7.2', '255.255.255.0')).to.equal('10.231.7.255');
  });

  it('parses a node status answer', () => {
    const entry = (name: string, suffix: number, group: boolean) => {
      const b = Buffer.alloc(18, 0x20);
      b.write(name, 0, 'latin1');
      b[15] = suffix;
      b.writeUInt16BE(group ? 0x8400 : 0x0400, 16);
      return b;
    };
    const names = [entry('NAS', 0x00, false), entry('NAS', 0x20, false), entry('WORKGROUP', 0x00, true)];
    const header = Buffer.from([0, 1, 0x84, 0x00, 0, 0, 0, 1, 0, 0, 0, 0]);
    const rdata = Buffer.concat([Buffer.from([names.length]), ...names, Buffer.alloc(46)]);
    const rr = Buffer.alloc(10);
    rr.writeUInt16BE(0x21, 0);
    rr.writeUInt16BE(1, 2);
    rr.writeUInt16BE(rdata.length, 8);
    const msg = Buffer.concat([header, encodeName('*', 0), rr, rdata]);
    expect(responseInfo(msg)).to.deep.equal({ id: 1, type: 0x21 });
    expect(serverOf(parseNodeStatus(msg))).to.deep.equal({ name: 'NAS', workgroup: 'WORKGROUP', fileServer: true });
  });

  it('builds an mDNS query and reads PTR, SRV and A answers', () => {
    expect(ptrQuery(0).includes(Buffer.from('_smb'))).to.equal(true);
    const label = (s: string) => Buffer.concat([Buffer.from([s.length]), Buffer.from(s)]);
    const name = (...ls: string[]) => Buffer.concat([...ls.map(label), Buffer.from([0])]);
    const rr = (n: Buffer, type: number, data: Buffer) => {
      const h = Buffer.alloc(10);
      h.writeUInt16BE(type, 0);
      h.writeUInt16BE(1, 2);
      h.writeUInt16BE(data.length, 8);
      return Buffer.concat([n, h, data]);
    };
    const header = Buffer.from([0, 0, 0x84, 0, 0, 0, 0, 3, 0, 0, 0, 0]);
    const srvData = Buffer.concat([Buffer.from([0, 0, 0, 0, 0x01, 0xbd]), name('nas', 'local')]);
    const msg = Buffer.concat([
      header,
      rr(name('_smb', '_tcp', 'local'), 12, name('NAS Files', '_smb', '_tcp', 'local')),
      rr(name('NAS Files', '_smb', '_tcp', 'local'), 33, srvData),
      rr(name('nas', 'local'), 1, Buffer.from([10, 1, 2, 3])),
    ]);
    expect(smbHostsOf(parseMessage(msg))).to.deep.equal([{ instance: 'NAS Files', host: 'nas.local', port: 445, addresses: ['10.1.2.3'] }]);
  });

  it('builds a WS-Discovery probe and reads ProbeMatches', () => {
    expect(probe('urn:uuid:1').toString()).to.include('<wsd:Types>wsdp:Device</wsd:Types>');
    const xml =
      '<soap:Envelope><soap:Header><wsa:RelatesTo>urn:uuid:1</wsa:RelatesTo></soap:Header><soap:Body><wsd:ProbeMatches><wsd:ProbeMatch>' +
      '<wsa:EndpointReference><wsa:Address>urn:uuid:abc</wsa:Address></wsa:EndpointReference><wsd:Types>wsdp:Device pub:Computer</wsd:Types>' +
      '<wsd:XAddrs>http://10.1.2.3:5357/abc</wsd:XAddrs></wsd:ProbeMatch></wsd:ProbeMatches></soap:Body></soap:Envelope>';
    expect(parseProbeMatches(xml)).to.deep.equal([
      { endpoint: 'urn:uuid:abc', types: ['wsdp:Device', 'pub:Computer'], xaddrs: ['http://10.1.2.3:5357/abc'], relatesTo: 'urn:uuid:1' },
    ]);
    expect(parseProbeMatches('<Probe/>')).to.deep.equal([]);
  });
});
