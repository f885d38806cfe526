/**
 * A loopback-only HTTP service for the proxy's escalation tests (run inside
 * a lab namespace): it stands for "a service bound to loopback" that no
 * entry may publish, and records every request it gets (one JSON line with
 * the headers, appended to <file>), so a test can tell whether the proxy
 * ever reached it and what it was sent.
 * Usage: node proxy-recorder.js <host> <port> <file>; prints "listening".
 */
import fs from 'node:fs';
import http from 'node:http';

const [host, port, file] = process.argv.slice(2);
http
  .createServer((req, res) => {
    fs.appendFileSync(file, JSON.stringify({ url: req.url, headers: req.headers }) + '\n');
    const body = JSON.stringify({ recorder: true, headers: req.headers });
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  })
  .listen(Number(port), host, () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => process.exit(0));
