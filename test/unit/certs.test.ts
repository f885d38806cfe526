import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { expect } from 'chai';
import { createCa, createCsr, CsrError, fingerprint, generateKeyPair, issueNodeCert, issuedBy, keyMatchesCert, nodeIdOf, signCsr } from '../../certs/pki.js';
import { ClusterFiles } from '../../certs/files.js';
import { JoinTokens, JoinTokenError, parseJoinToken } from '../../certs/join-tokens.js';
import { Store } from '../../daemon/store/store.js';

describe('cluster certificates', () => {
  const ca = createCa('cl_test');

  it('signs a CSR for the node it names, as TLS server and client', () => {
    const keys = generateKeyPair();
    const cert = signCsr(ca, createCsr(keys, 'node_abc'), 'node_abc');
    expect(issuedBy(cert, ca.certPem)).to.equal(true);
    expect(keyMatchesCert(keys.privateKeyPem, cert)).to.equal(true);
    expect(nodeIdOf(cert)).to.equal('node_abc');
    expect(fingerprint(cert)).to.match(/^[0-9a-f]{64}$/);
    // Node's TLS accepts the pair and the CA.
    expect(() => tls.createSecureContext({ ca: ca.certPem, cert, key: keys.privateKeyPem })).to.not.throw();
  });

  it('refuses a CSR naming another node, or one whose signature does not verify', () => {
    const keys = generateKeyPair();
    const csr = createCsr(keys, 'node_abc');
    expect(() => signCsr(ca, csr, 'node_other')).to.throw(CsrError, /names 'node_abc'/);
    expect(() => signCsr(ca, 'not a csr', 'node_abc')).to.throw(CsrError);
  });

  it('a certificate of another CA is not issued by ours', () => {
    const other = createCa('cl_other');
    const keys = generateKeyPair();
    const cert = issueNodeCert(other, keys.publicKeyPem, 'node_abc');
    expect(issuedBy(cert, ca.certPem)).to.equal(false);
    expect(issuedBy(cert, other.certPem)).to.equal(true);
  });

  it('writes keys with mode 0600 under <data dir>/cluster', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-certs-'));
    try {
      const keys = generateKeyPair();
      const files = new ClusterFiles(dir);
      files.save({ caCertPem: ca.certPem, caKeyPem: ca.keyPem, certPem: issueNodeCert(ca, keys.publicKeyPem, 'n1'), keyPem: keys.privateKeyPem });
      expect(fs.statSync(files.caKey).mode & 0o777).to.equal(0o600);
      expect(fs.statSync(files.nodeKey).mode & 0o777).to.equal(0o600);
      expect(fs.statSync(files.dir).mode & 0o777).to.equal(0o700);
      expect(files.load()?.caCertPem).to.equal(ca.certPem);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('cluster join tokens', () => {
  let dir: string;
  let store: Store;
  let tokens: JoinTokens;
  const fp = 'ab'.repeat(32);

  before(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-jt-'));
    store = await Store.open(path.join(dir, 'db'));
    tokens = new JoinTokens(store);
  });
  after(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('carries the CA fingerprint and is stored only as a hash', async () => {
    const { token, id } = await tokens.create(fp);
    const parsed = parseJoinToken(token);
    expect(parsed.caFingerprint).to.equal(fp);
    expect(parsed.id).to.equal(id);
    const rec = await store.sub<any>('join_tokens').get(id);
    expect(JSON.stringify(rec)).to.not.include(parsed.secret);
  });

  it('is one-time', async () => {
    const { token } = await tokens.create(fp);
    await tokens.consume(token);
    const err = await tokens.consume(token).catch((e) => e);
    expect(err).to.be.instanceOf(JoinTokenError);
    expect(err.reason).to.equal('unknown');
  });

  it('can be spent only once even by concurrent joins', async () => {
    const { token } = await tokens.create(fp);
    const results = await Promise.allSettled([tokens.consume(token), tokens.consume(token), tokens.consume(token)]);
    expect(results.filter((r) => r.status === 'fulfilled')).to.have.length(1);
  });

  it('expires', async () => {
    const { token } = await tokens.create(fp, 50);
    await new Promise((r) => setTimeout(r, 80));
    const err = await tokens.consume(token).catch((e) => e);
    expect(err.reason).to.equal('expired');
  });

  it('refuses a wrong secret and malformed text', async () => {
    const { token } = await tokens.create(fp);
    const p = parseJoinToken(token);
    const wrong = `hostd-join.${p.id}.${'A'.repeat(43)}.${fp}`;
    expect((await tokens.consume(wrong).catch((e) => e)).reason).to.equal('mismatch');
    expect(() => parseJoinToken('hello')).to.throw(JoinTokenError);
  });
});
