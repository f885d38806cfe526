/**
 * The root of the proxy's internal CA, the same on every member.
 *
 * Caddy's `local` CA would make its own root on each node, so after a move
 * or takeover clients would meet a certificate from a root they never saw.
 * Instead every node derives one root from a secret all members share (the
 * cluster gives one, derived from the cluster CA key; a node outside a
 * cluster keeps its own in the secret store): an RSA key generated from a
 * deterministic byte stream, and a self-signed certificate with fixed fields.
 * PKCS#1 v1.5 signatures are deterministic, so the certificate is the same
 * bytes everywhere and clients trust one root for the whole cluster. Caddy
 * signs its own intermediate with it on each node.
 *
 * Key generation in pure JS takes a second or two of CPU (ca-keygen.ts runs it
 * in a worker thread): the result is kept in `dir`, named by a hash of the
 * seed, and made again only when the seed changes (the node joins or leaves a
 * cluster). It is made when first needed (Caddy's start or config, the certs
 * list), not at every daemon start.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import forge from 'node-forge';
import type { CaRoot } from '../driver.js';
import { generateRootKey } from './ca-keygen.js';

/**
 * The root certificate and key for `seed`, made (in `dir`) the first time this
 * seed is seen.
 */
export async function proxyRoot(seed: Buffer, dir: string): Promise<CaRoot> {
  const id = crypto.createHash('sha256').update(seed).digest('hex').slice(0, 16);
  const certFile = path.join(dir, `root-${id}.crt`);
  const keyFile = path.join(dir, `root-${id}.key`);
  if (!fs.existsSync(certFile) || !fs.existsSync(keyFile)) {
    const privateKey = forge.pki.privateKeyFromPem(await generateRootKey(seed)) as forge.pki.rsa.PrivateKey;
    const cert = forge.pki.createCertificate();
    cert.publicKey = forge.pki.setRsaPublicKey(privateKey.n, privateKey.e);
    cert.serialNumber = '01' + id;
    // Fixed dates: every node must make the same bytes.
    cert.validity.notBefore = new Date(Date.UTC(2024, 0, 1));
    cert.validity.notAfter = new Date(Date.UTC(2049, 11, 31));
    const name = [
      { name: 'commonName', value: `hostd proxy CA ${id}` },
      { name: 'organizationName', value: 'hostd' },
    ];
    cert.setSubject(name);
    cert.setIssuer(name);
    cert.setExtensions([
      { name: 'basicConstraints', cA: true, critical: true },
      { name: 'keyUsage', keyCertSign: true, cRLSign: true, critical: true },
      { name: 'subjectKeyIdentifier' },
    ]);
    cert.sign(privateKey, forge.md.sha256.create());
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    // Key first, certificate last: the certificate's presence says both are complete.
    writeAtomic(keyFile, forge.pki.privateKeyToPem(privateKey), 0o600);
    writeAtomic(certFile, forge.pki.certificateToPem(cert), 0o644);
  }
  const certPem = fs.readFileSync(certFile, 'utf8');
  const der = Buffer.from(forge.asn1.toDer(forge.pki.certificateToAsn1(forge.pki.certificateFromPem(certPem))).getBytes(), 'binary');
  return { certFile, keyFile, certPem, fingerprint: crypto.createHash('sha256').update(der).digest('hex') };
}

function writeAtomic(file: string, text: string, mode: number): void {
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, text, { mode });
  fs.renameSync(tmp, file);
}
