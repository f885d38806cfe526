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
 * Key generation in pure JS takes a second or two: the result is kept in
 * `dir`, named by a hash of the seed, and made again only when the seed
 * changes (the node joins or leaves a cluster).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import forge from 'node-forge';
import type { CaRoot } from '../driver.js';

/** A byte stream from HMAC-SHA256 in counter mode over the seed: the same seed, the same bytes. */
function streamOf(seed: Buffer): { getBytesSync(n: number): string } {
  let counter = 0;
  let pool = Buffer.alloc(0);
  return {
    getBytesSync(n: number): string {
      while (pool.length < n) {
        const block = crypto.createHmac('sha256', seed).update(`hostd-proxy-ca-stream:${counter++}`).digest();
        pool = Buffer.concat([pool, block]);
      }
      const out = pool.subarray(0, n);
      pool = pool.subarray(n);
      return out.toString('binary');
    },
  };
}

/**
 * The root certificate and key for `seed`, made (in `dir`) the first time this
 * seed is seen. Generation runs in slices so the daemon keeps serving meanwhile.
 */
export async function proxyRoot(seed: Buffer, dir: string): Promise<CaRoot> {
  const id = crypto.createHash('sha256').update(seed).digest('hex').slice(0, 16);
  const certFile = path.join(dir, `root-${id}.crt`);
  const keyFile = path.join(dir, `root-${id}.key`);
  if (!fs.existsSync(certFile) || !fs.existsSync(keyFile)) {
    const keys = await new Promise<forge.pki.rsa.KeyPair>((resolve, reject) => {
      forge.pki.rsa.generateKeyPair({ bits: 2048, e: 0x10001, prng: streamOf(seed), workers: -1 } as forge.pki.rsa.GenerateKeyPairOptions, (err, kp) =>
        err ? reject(err) : resolve(kp),
      );
    });
    const cert = forge.pki.createCertificate();
    cert.publicKey = keys.publicKey;
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
    cert.sign(keys.privateKey, forge.md.sha256.create());
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    // Key first, certificate last: the certificate's presence says both are complete.
    writeAtomic(keyFile, forge.pki.privateKeyToPem(keys.privateKey), 0o600);
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
