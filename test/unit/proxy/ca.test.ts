/**
 * The proxy's internal CA root: the same bytes from the same seed (every
 * member makes the same root, also one running an older hostd: the key is
 * pinned to what the generator made before it moved to a worker thread), and
 * made off the daemon's thread.
 */
import { expect } from 'chai';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { proxyRoot } from '../../../daemon/proxy/caddy/ca.js';

describe('proxy internal CA root', function () {
  this.timeout(120_000);
  const seed = Buffer.from('11'.repeat(32), 'hex');
  const dirs: string[] = [];
  const dir = () => {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-ca-'));
    dirs.push(d);
    return d;
  };
  after(() => {
    for (const d of dirs) fs.rmSync(d, { recursive: true, force: true });
  });

  it('makes the same key and certificate from the same seed, the key the earlier generator made, in a worker thread', async () => {
    const elu = performance.eventLoopUtilization();
    const a = await proxyRoot(seed, dir());
    // The daemon's thread only waited: generating 2048-bit RSA in pure JS on it would have kept it busy throughout.
    expect(performance.eventLoopUtilization(elu).utilization).to.be.below(0.5);
    const b = await proxyRoot(seed, dir());
    expect(a.certPem).to.equal(b.certPem);
    expect(a.fingerprint).to.equal(b.fingerprint);
    const key = fs.readFileSync(a.keyFile, 'utf8');
    expect(crypto.createHash('sha256').update(key).digest('hex')).to.equal('59cdb59a414475125e7df288855014f0ccb01371d0d3fff09a9bf0bc6ed68214');
    expect(fs.statSync(a.keyFile).mode & 0o777).to.equal(0o600);
    // The certificate is the key's: it verifies with the key's public half.
    const cert = new crypto.X509Certificate(a.certPem);
    expect(cert.checkPrivateKey(crypto.createPrivateKey(key))).to.equal(true);
    const other = await proxyRoot(Buffer.from('22'.repeat(32), 'hex'), dir());
    expect(other.fingerprint).to.not.equal(a.fingerprint);
  });
});
