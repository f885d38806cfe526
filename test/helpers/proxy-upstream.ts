/**
 * The upstream HTTP server of the proxy tests (run inside a namespace):
 * answers every request with JSON naming the address the request came from
 * (which node's Caddy proxied it), the Host, the path and the headers.
 * Usage: node proxy-upstream.js <host> <port>; prints "listening" when ready.
 */
import http from 'node:http';

const [host, port] = process.argv.slice(2);
const server = http.createServer((req, res) => {
  const body = JSON.stringify({ remote: req.socket.remoteAddress, host: req.headers.host, url: req.url, method: req.method, headers: req.headers });
  res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
});
server.keepAliveTimeout = 60_000;
server.listen(Number(port), host, () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => process.exit(0));
