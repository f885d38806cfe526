/**
 * The baseline: a bare node:http server in its own process answering a fixed
 * JSON body (given in BENCH_PAYLOAD), so it is measured the same way as hostd.
 */
import http from 'node:http';

const payload = process.env.BENCH_PAYLOAD ?? '{}';
const server = http.createServer((_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(payload) });
  res.end(payload);
});
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(JSON.stringify({ port: (server.address() as { port: number }).port }) + '\n');
});
process.on('SIGTERM', () => server.close(() => process.exit(0)));
