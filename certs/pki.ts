/**
 * The cluster's certificates. Keys are RSA 2048 made by node:crypto (fast,
 * native); certificates and requests are built and signed with node-forge.
 * A node certificate names its node id in the subject CN and in a SAN URI
 * (`urn:hostd:node:<id>`), is usable as TLS server and client, and is signed
 * by the cluster CA. Fingerprints are SHA-256 of the DER, lower-case hex.
 */
import crypto from 'node:crypto';
import forge from 'node-forge';

export interface KeyPair {
  privateKeyPem: string;
  publicKeyPem: string;
}

export interface CaBundle {
  certPem: string;
  keyPem: string;
}

const NODE_URI_PREFIX = 'urn:hostd:node:';
const CA_YEARS = 20;
const NODE_YEARS = 10;

export function generateKeyPair(): KeyPair {
  const { privateKey, publicKey } = crypto.generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs1', format: 'pem' },
  });
  return { privateKeyPem: privateKey, publicKeyPem: publicKey };
}

function serial(): string {
  // Positive, 16 bytes: a leading 0x01..0x7f byte keeps the DER integer positive.
  const b = crypto.randomBytes(16);
  b[0] = (b[0] & 0x7f) | 0x01;
  return b.toString('hex');
}

function validity(cert: forge.pki.Certificate, years: number): void {
  const now = Date.now();
  cert.validity.notBefore = new Date(now - 60 * 60 * 1000); // an hour of clock skew
  const end = new Date(now);
  end.setUTCFullYear(end.getUTCFullYear() + years);
  cert.validity.notAfter = end;
}

/** A new self-signed cluster CA. */
export function createCa(clusterId: string): CaBundle {
  const keys = generateKeyPair();
  const cert = forge.pki.createCertificate();
  cert.publicKey = forge.pki.publicKeyFromPem(keys.publicKeyPem);
  cert.serialNumber = serial();
  validity(cert, CA_YEARS);
  const subject = [
    { name: 'commonName', value: `hostd cluster CA ${clusterId}` },
    { name: 'organizationName', value: 'hostd' },
  ];
  cert.setSubject(subject);
  cert.setIssuer(subject);
  cert.setExtensions([
    { name: 'basicConstraints', cA: true, critical: true },
    { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
    { name: 'subjectKeyIdentifier' },
  ]);
  cert.sign(forge.pki.privateKeyFromPem(keys.privateKeyPem), forge.md.sha256.create());
  return { certPem: forge.pki.certificateToPem(cert), keyPem: keys.privateKeyPem };
}

/** A certificate signing request for this node, CN = node id. */
export function createCsr(keyPair: KeyPair, nodeId: string): string {
  const csr = forge.pki.createCertificationRequest();
  csr.publicKey = forge.pki.publicKeyFromPem(keyPair.publicKeyPem);
  csr.setSubject([{ name: 'commonName', value: nodeId }]);
  csr.sign(forge.pki.privateKeyFromPem(keyPair.privateKeyPem), forge.md.sha256.create());
  return forge.pki.certificationRequestToPem(csr);
}

export class CsrError extends Error {}

/**
 * Signs a CSR with the CA after checking its own signature and that it names
 * `nodeId`. The issued certificate is for that node id only.
 */
export function signCsr(ca: CaBundle, csrPem: string, nodeId: string): string {
  let csr: ReturnType<typeof forge.pki.certificationRequestFromPem>;
  try {
    csr = forge.pki.certificationRequestFromPem(csrPem);
  } catch (err) {
    throw new CsrError(`certificate request is not valid PEM: ${(err as Error).message}`);
  }
  if (!csr.verify()) throw new CsrError('certificate request signature does not verify');
  const cn = csr.subject.getField('CN')?.value;
  if (cn !== nodeId) throw new CsrError(`certificate request names '${String(cn).slice(0, 64)}', not node '${nodeId}'`);
  if (!csr.publicKey) throw new CsrError('certificate request has no public key');
  return issueNodeCert(ca, csr.publicKey as forge.pki.rsa.PublicKey, nodeId);
}

/** Issues a node certificate for a public key (used for this node's own certificate too). */
export function issueNodeCert(ca: CaBundle, publicKey: forge.pki.rsa.PublicKey | string, nodeId: string): string {
  if (!/^[A-Za-z0-9_.-]{1,64}$/.test(nodeId)) throw new CsrError(`node id '${nodeId}' is not valid`);
  const caCert = forge.pki.certificateFromPem(ca.certPem);
  const cert = forge.pki.createCertificate();
  cert.publicKey = typeof publicKey === 'string' ? forge.pki.publicKeyFromPem(publicKey) : publicKey;
  cert.serialNumber = serial();
  validity(cert, NODE_YEARS);
  cert.setSubject([
    { name: 'commonName', value: nodeId },
    { name: 'organizationName', value: 'hostd' },
  ]);
  cert.setIssuer(caCert.subject.attributes);
  cert.setExtensions([
    { name: 'basicConstraints', cA: false, critical: true },
    { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, critical: true },
    { name: 'extKeyUsage', serverAuth: true, clientAuth: true },
    { name: 'subjectAltName', altNames: [{ type: 6, value: NODE_URI_PREFIX + nodeId }] },
    { name: 'subjectKeyIdentifier' },
    { name: 'authorityKeyIdentifier', keyIdentifier: caCert.generateSubjectKeyIdentifier().getBytes() },
  ]);
  cert.sign(forge.pki.privateKeyFromPem(ca.keyPem), forge.md.sha256.create());
  return forge.pki.certificateToPem(cert);
}

/** Normalises a fingerprint (colon-separated or not, any case) to lower-case hex. */
export function normalizeFingerprint(fp: string): string {
  return fp.replace(/:/g, '').toLowerCase();
}

/** SHA-256 fingerprint of a PEM (or DER) certificate, lower-case hex. */
export function fingerprint(cert: string | Buffer): string {
  return normalizeFingerprint(new crypto.X509Certificate(cert).fingerprint256);
}

/** The node id a certificate was issued for (SAN URI, else CN). */
export function nodeIdOf(certPem: string | Buffer): string | undefined {
  const x = new crypto.X509Certificate(certPem);
  const san = x.subjectAltName ?? '';
  const m = /URI:urn:hostd:node:([A-Za-z0-9_.-]+)/.exec(san);
  if (m) return m[1];
  const cn = /(?:^|\n)CN=([^\n]+)/.exec(x.subject);
  return cn?.[1];
}

/** True when `certPem` was signed by the CA certificate `caPem`. */
export function issuedBy(certPem: string | Buffer, caPem: string | Buffer): boolean {
  const cert = new crypto.X509Certificate(certPem);
  const ca = new crypto.X509Certificate(caPem);
  return cert.checkIssued(ca) && cert.verify(ca.publicKey);
}

/** DER bytes to PEM text. */
export function derToPem(der: Buffer): string {
  const b64 = der
    .toString('base64')
    .replace(/(.{64})/g, '$1\n')
    .replace(/\n$/, '');
  return `-----BEGIN CERTIFICATE-----\n${b64}\n-----END CERTIFICATE-----\n`;
}

/** True when a private key PEM matches a certificate's public key. */
export function keyMatchesCert(keyPem: string, certPem: string): boolean {
  const cert = new crypto.X509Certificate(certPem);
  return cert.checkPrivateKey(crypto.createPrivateKey(keyPem));
}
