/**
 * The internal CA root's RSA key, generated from the seed in a worker thread.
 *
 * The key must be the same on every member, so it comes from node-forge with a
 * deterministic byte stream (node's own generator cannot be seeded); in pure
 * JS that costs about 2 s of CPU. On the daemon's thread, even in slices, it
 * slowed everything else the daemon did meanwhile (its start among them), so
 * it runs here and only the key's PEM comes back.
 */
import crypto from 'node:crypto';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import forge from 'node-forge';

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

/** The key for `seed`, as PKCS#1 PEM (synchronous: call it only off the daemon's thread). */
export function keyPemOf(seed: Buffer): string {
  const keys = forge.pki.rsa.generateKeyPair({ bits: 2048, e: 0x10001, prng: streamOf(seed) } as forge.pki.rsa.GenerateKeyPairOptions);
  return forge.pki.privateKeyToPem(keys.privateKey);
}

/** Generates the key for `seed` in a worker thread. */
export function generateRootKey(seed: Buffer): Promise<string> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: { seed: seed.toString('hex') } });
    let pem: string | undefined;
    worker.once('message', (m: string) => (pem = m));
    worker.once('error', reject);
    worker.once('exit', (code) => (pem ? resolve(pem) : reject(new Error(`the CA key worker exited with code ${code} and no key`))));
  });
}

if (!isMainThread && parentPort && (workerData as { seed?: string } | null)?.seed) {
  parentPort.postMessage(keyPemOf(Buffer.from((workerData as { seed: string }).seed, 'hex')));
}
