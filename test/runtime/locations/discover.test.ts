/**
 * POST /locations/discover against a real Samba server (smbd + nmbd) in a
 * namespace joined to hostd's namespace by a veth pair: every broadcast and
 * multicast hostd sends stays inside the two namespaces this test made.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { eventually, startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { findInFiles, missingForLocations, SmbLab } from '../../helpers/locations-smb.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { SMB_CLIENT } from '../../../daemon/locations/driver.js';
import { SmbDriver } from '../../../daemon/locations/smb/index.js';

describe('locations: discovery on a test network (runtime)', function () {
  this.timeout(90_000);
  let lab: SmbLab;
  let d: TestDaemon;
  let tok: string;
  const api = (body: unknown) => d.request('POST', '/api/v1/locations/discover', { token: tok, body });

  before(async function () {
    await requireRuntime(this, 'locations', new SmbDriver('auto'), {
      need: [SMB_CLIENT],
      also: async () => (await missingForLocations()) ?? (fs.existsSync('/usr/sbin/nmbd') ? null : 'nmbd is not installed (package samba)'),
    });
    lab = new SmbLab({ netbiosName: 'HOSTDNBT' });
    await lab.setup();
    await lab.withPeer();
    await lab.start({ netbios: true });
    d = await startDaemon({ wrap: lab.wrap, netns: lab.ns, configYaml: 'locations:\n  discovery_timeout_ms: 1500\n' });
    tok = await d.token('discover', ['connections.read']);
  });

  after(async () => {
    await d?.stop();
    await lab?.cleanup();
  });

  it('finds the SMB host on the local network by NetBIOS, within its time bound', async () => {
    // nmbd registers its names a moment after it starts.
    const r = await eventually(
      async () => {
        const x = await api({});
        return x.status === 200 && x.body.hosts.some((h: any) => h.name === 'HOSTDNBT') ? x : undefined;
      },
      30_000,
      'nmbd to answer',
    );
    const host = r.body.hosts.find((h: any) => h.name === 'HOSTDNBT');
    expect(host).to.deep.equal({ name: 'HOSTDNBT', addresses: [lab.serverAddr], workgroup: 'HOSTDTEST', file_server: true, via: ['netbios'] });
    expect(r.body.timeout_ms).to.equal(1500);
    expect(r.body.duration_ms).to.be.a('number');
    // Sent on the namespace's one interface (never loopback, never anything outside).
    for (const m of ['netbios', 'mdns', 'wsd']) expect(r.body.methods[m]).to.match(/^sent on hc/);
  });

  it("lists a host's shares, as guest and with credentials used once and not kept", async () => {
    let r = await api({ host: 'HOSTDNBT', ip: lab.serverAddr });
    expect(r.status, r.text).to.equal(200);
    expect(r.body).to.deep.include({ host: 'HOSTDNBT', ip: lab.serverAddr, username: null });
    expect(r.body.shares.filter((s: any) => s.type === 'disk').map((s: any) => s.name)).to.deep.equal(['guest', 'private']);

    r = await api({ host: lab.serverAddr, username: 'smbtest', password: lab.password });
    expect(r.status, r.text).to.equal(200);
    expect(r.body.username).to.equal('smbtest');
    expect(r.text).not.to.include(lab.password);
    expect(fs.existsSync(path.join(d.dataDir, 'secrets', 'locations'))).to.equal(false);
    expect(findInFiles(d.dataDir, lab.password)).to.deep.equal([]);
    expect(JSON.stringify(d.logs)).not.to.include(lab.password);

    r = await api({ host: lab.serverAddr, username: 'smbtest', password: 'not-the-password' });
    expect([r.status, r.body]).to.deep.equal([400, { error: `SMB host '${lab.serverAddr}' rejected the 'username' and 'password' (NT_STATUS_LOGON_FAILURE)` }]);
  });

  it('refuses arguments that do not fit together', async () => {
    let r = await api({ ip: lab.serverAddr });
    expect([r.status, r.body]).to.deep.equal([400, { error: "argument 'ip' needs 'host' (the host whose shares to list)" }]);
    r = await api({ host: 'HOSTDNBT', ip: 'not-an-ip' });
    expect([r.status, r.body]).to.deep.equal([400, { error: "argument 'ip' must be an IPv4 address" }]);
    r = await api({ host: 'bad host' });
    expect([r.status, r.body]).to.deep.equal([400, { error: "argument 'host' must be a DNS or NetBIOS host name or an IPv4 address" }]);
    r = await api({ username: 'smbtest', password: 'x' });
    expect([r.status, r.body]).to.deep.equal([400, { error: "arguments 'username' and 'password' need 'host' (host discovery sends no credentials)" }]);
  });
});
