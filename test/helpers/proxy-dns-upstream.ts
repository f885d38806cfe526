/**
 * A stand-in upstream resolver for the DNS responder tests (run inside a lab
 * namespace): answers A <answer> for every name with a 60 s TTL.
 * Usage: node proxy-dns-upstream.js <host> <port> <answer>; prints "listening".
 */
import dgram from 'node:dgram';
import dnsPacket from 'dns-packet';

const [host, port, answer] = process.argv.slice(2);
const s = dgram.createSocket('udp4');
s.on('message', (msg, r) => {
  const q = dnsPacket.decode(msg);
  const out = dnsPacket.encode({
    type: 'response',
    id: q.id,
    flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE,
    questions: q.questions,
    answers: (q.questions ?? []).filter((x) => x.type === 'A').map((x) => ({ type: 'A' as const, name: x.name, ttl: 60, class: 'IN' as const, data: answer })),
  });
  s.send(out, r.port, r.address);
});
s.bind(Number(port), host, () => process.stdout.write('listening\n'));
process.on('SIGTERM', () => process.exit(0));
