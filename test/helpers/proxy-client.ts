/**
 * The client of the failover tests (run inside the client namespace): one
 * HTTPS request every <interval> ms to <url>, its name resolved to <address>
 * (the floating address), trusting the CA bundle at <ca>; a new connection
 * for each request, as a client that reconnects would. Each request prints
 * one JSON line {t, ok, status, ms, via, err}; SIGTERM ends it.
 * Usage: node proxy-client.js <url> <address> <ca-file> <interval-ms>
 */
import fs from 'node:fs';
import https from 'node:https';

const [url, address, caFile, interval] = process.argv.slice(2);
const ca = fs.readFileSync(caFile);
let stop = false;
process.on('SIGTERM', () => (stop = true));

function one(): Promise<void> {
  const t = Date.now();
  const t0 = process.hrtime.bigint();
  return new Promise((resolve) => {
    const done = (ok: boolean, status: number, via: string | null, err: string | null) => {
      process.stdout.write(JSON.stringify({ t, ok, status, ms: Number(process.hrtime.bigint() - t0) / 1e6, via, err }) + '\n');
      resolve();
    };
    const req = https.get(
      url,
      {
        ca,
        agent: false,
        timeout: 1000,
        lookup: (_h, opts, cb) => ((opts as { all?: boolean }).all ? (cb as any)(null, [{ address, family: 4 }]) : cb(null, address, 4)),
      },
      (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => {
          let via: string | null = null;
          try {
            via = JSON.parse(body).remote ?? null;
          } catch {
            /* not the upstream's answer */
          }
          done(res.statusCode === 200, res.statusCode ?? 0, via, res.statusCode === 200 ? null : body.slice(0, 200));
        });
        res.on('error', (e) => done(false, 0, null, e.message));
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', (e) => done(false, 0, null, e.message));
  });
}

while (!stop) {
  const start = Date.now();
  await one();
  const wait = Number(interval) - (Date.now() - start);
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
}
process.exit(0);
