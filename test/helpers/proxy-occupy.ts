/** Holds a TCP port on every address (run inside a lab namespace). Usage: node proxy-occupy.js <port>; prints "listening". */
import net from 'node:net';

net.createServer((c) => c.destroy()).listen(Number(process.argv[2]), '0.0.0.0', () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => process.exit(0));
