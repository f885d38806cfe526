/**
 * A minimal image registry (Docker Registry HTTP API v2, read-only) for the
 * pull tests: it serves one image made from the test rootfs, inside the
 * private engine's network namespace on 127.0.0.1 (the engine treats loopback
 * registries as insecure, so plain HTTP is fine). Blobs can be sent slowly so
 * that a pull lasts long enough to be seen in progress.
 *
 * It runs as a child process (`ip netns exec <ns> node <this file> ...`), so
 * that it listens in the engine's namespace and nothing leaves it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import zlib from 'node:zlib';
import { fileURLToPath } from 'node:url';

const digest = (b: Buffer) => `sha256:${crypto.createHash('sha256').update(b).digest('hex')}`;

interface Blobs {
  manifest: Buffer;
  blobs: Map<string, Buffer>;
}

function build(rootfsTar: string): Blobs {
  const tar = fs.readFileSync(rootfsTar);
  const layer = zlib.gzipSync(tar);
  const config = Buffer.from(
    JSON.stringify({
      architecture: 'amd64',
      os: 'linux',
      config: { Cmd: ['/bin/sh'] },
      rootfs: { type: 'layers', diff_ids: [digest(tar)] },
      history: [{ created_by: 'hostd test registry' }],
    }),
  );
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
      config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: config.length, digest: digest(config) },
      layers: [{ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: layer.length, digest: digest(layer) }],
    }),
  );
  return {
    manifest,
    blobs: new Map([
      [digest(config), config],
      [digest(layer), layer],
    ]),
  };
}

/** The server (run in the child). `slowMs`: how long sending the layer takes. */
function serve(rootfsTar: string, port: number, slowMs: number): void {
  const { manifest, blobs } = build(rootfsTar);
  const srv = http.createServer((req, res) => {
    const url = req.url ?? '';
    if (url === '/v2/' || url === '/v2') {
      res.writeHead(200, { 'content-type': 'application/json', 'docker-distribution-api-version': 'registry/2.0' });
      res.end('{}');
      return;
    }
    const m = /^\/v2\/(.+)\/(manifests|blobs)\/([^/?]+)/.exec(url);
    if (!m) {
      res.writeHead(404).end();
      return;
    }
    if (m[2] === 'manifests') {
      res.writeHead(200, {
        'content-type': 'application/vnd.docker.distribution.manifest.v2+json',
        'docker-content-digest': digest(manifest),
        'content-length': manifest.length,
      });
      res.end(req.method === 'HEAD' ? undefined : manifest);
      return;
    }
    const blob = blobs.get(m[3]);
    if (!blob) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'docker-content-digest': m[3], 'content-length': blob.length });
    if (req.method === 'HEAD') {
      res.end();
      return;
    }
    if (blob.length < 4096 || slowMs <= 0) {
      res.end(blob);
      return;
    }
    const chunks = 20;
    const size = Math.ceil(blob.length / chunks);
    let i = 0;
    const next = () => {
      if (i >= chunks) {
        res.end();
        return;
      }
      res.write(blob.subarray(i * size, (i + 1) * size));
      i++;
      setTimeout(next, slowMs / chunks);
    };
    next();
  });
  srv.listen(port, '127.0.0.1', () => process.stdout.write('ready\n'));
}

export interface TestRegistry {
  /** host:port as image references use it. */
  address: string;
  stop(): Promise<void>;
}

/** Starts the registry inside `netns`, serving every repository name as the test image. */
export async function startRegistry(netns: string, rootfsTar: string, port: number, slowMs = 0): Promise<TestRegistry> {
  const self = fileURLToPath(import.meta.url);
  const proc: ChildProcess = spawn('ip', ['netns', 'exec', netns, process.execPath, self, 'serve', rootfsTar, String(port), String(slowMs)], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let err = '';
  proc.stderr!.on('data', (c) => (err += c.toString()));
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`test registry did not start: ${err}`)), 15_000);
    proc.stdout!.on('data', (c) => {
      if (c.toString().includes('ready')) {
        clearTimeout(t);
        resolve();
      }
    });
    proc.once('exit', (code) => {
      clearTimeout(t);
      reject(new Error(`test registry exited (${code}): ${err}`));
    });
  });
  return {
    address: `127.0.0.1:${port}`,
    stop: async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      await exited;
    },
  };
}

if (process.argv[2] === 'serve' && path.resolve(process.argv[1] ?? '') === fileURLToPath(import.meta.url)) {
  serve(process.argv[3], Number(process.argv[4]), Number(process.argv[5]));
}
