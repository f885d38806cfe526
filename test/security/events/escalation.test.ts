/**
 * The event stream's containment against a real daemon: a token scoped to
 * one domain reads nothing of the others (here: every read scope but
 * system.read against activity events, the events this build writes for any
 * call; the per-event rules for every domain are in
 * test/unit/events/cursor-filter.test.ts); and readers that stop reading do
 * not grow the daemon's memory with the traffic: each gets `lagged` and is
 * closed, and the daemon's resident memory grows by far less than what they
 * were sent (measured from /proc, the daemon's own figure).
 */
import { expect } from 'chai';
import fs from 'node:fs';
import net from 'node:net';
import { startDaemon, eventually, type TestDaemon } from '../../helpers/daemon.js';
import { SseClient } from '../../integration/events/stream-client.js';

const STREAM = '/api/v1/events/stream';
const READ_SCOPES = ['vm.read', 'lxc.read', 'apps.read', 'files.read', 'connections.read', 'proxy.read', 'sandbox.read'];

/** The end of a chunked HTTP/1.1 body: the last chunk, empty, and no trailers. */
const LAST_CHUNK = '\r\n0\r\n\r\n';

/** Resident memory of a process, in bytes. */
function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return Number(m![1]) * 1024;
}

/** A reader that sends its request and never reads a byte of the answer. */
function stalledReader(d: TestDaemon, token: string): Promise<{ socket: net.Socket; drain: () => Promise<string> }> {
  const u = new URL(d.url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(u.port), u.hostname, () => {
      socket.write(`GET ${STREAM} HTTP/1.1\r\nhost: ${u.host}\r\naccept: text/event-stream\r\nauthorization: Bearer ${token}\r\n\r\n`);
      socket.pause();
      resolve({
        socket,
        // Reads all that was sent, to the end of the response (the daemon ends a lagged stream): its last,
        // empty chunk. The connection itself stays open for the next request (HTTP keep-alive) until the
        // server's idle timeout, a minute later, so its close is no sign of the stream's end.
        drain: () =>
          new Promise((res) => {
            const chunks: Buffer[] = [];
            let tail = '';
            const done = () => {
              res(Buffer.concat(chunks).toString('utf8'));
              socket.destroy();
            };
            socket.on('data', (c) => {
              chunks.push(c);
              tail = (tail + c.toString('latin1')).slice(-LAST_CHUNK.length);
              if (tail === LAST_CHUNK) done();
            });
            socket.on('close', done);
            socket.resume();
          }),
      });
    });
    socket.once('error', reject);
  });
}

describe('event stream containment (security)', function () {
  this.timeout(600_000);
  let d: TestDaemon;

  afterEach(async () => {
    await d?.stop();
  });

  /** The events of `list` that are not a `<domain>.state` event of a domain `scope` reads. */
  const foreign = (scope: string, list: Array<{ type: string }>) => {
    const own: Record<string, string[]> = {
      'proxy.read': ['proxy.state'],
      'lxc.read': ['lxc.state'],
      'apps.read': ['apps.state'],
      'vm.read': ['vms.state'],
      'sandbox.read': ['sandboxes.state'],
      'files.read': ['folders.state'],
      'connections.read': ['locations.state'],
    };
    return list.filter((e) => !(own[scope] ?? []).includes(e.type));
  };

  it('a token scoped to one domain reads nothing of another domain, on a stream or a page; system.read reads the activity', async () => {
    d = await startDaemon({ env: { HOSTD_EVENTS_BOOKMARK_MS: '100' } });
    const scoped = await Promise.all(READ_SCOPES.map(async (s) => ({ scope: s, token: await d.token(`only-${s.replace('.', '-')}`, [s]) })));
    const system = await d.token('system-reader', ['system.read']);
    const streams = await Promise.all(scoped.map((t) => SseClient.open(d.url + STREAM, { authorization: `Bearer ${t.token}` })));
    const sys = await SseClient.open(d.url + STREAM, { authorization: `Bearer ${system}` });
    try {
      // Activity of every domain: calls that fail and calls that succeed, by each scoped token and by the operator.
      for (const t of scoped) {
        await d.request('GET', '/api/v1/vms', { token: t.token });
        await d.request('DELETE', '/api/v1/folders/f_nope', { token: t.token });
      }
      await d.token('made-later', ['vm.read']);
      await eventually(() => sys.events().some((e) => e.resource === 'tokens/made-later'), 30_000, 'the system reader to see the last row');
      const top = sys.events().at(-1)!.seq;
      for (const [i, s] of streams.entries()) {
        await eventually(
          () => s.got.some((g) => g.event.type === 'bookmark' && g.event.seq >= top),
          30_000,
          `a bookmark past seq ${top} for ${scoped[i].scope}`,
        );
        // Its own domain's state events (the proxy reports its state at start) and nothing else.
        expect(foreign(scoped[i].scope, s.events()), scoped[i].scope).to.deep.equal([]);
        const page = await d.request('GET', '/api/v1/events?limit=1000', { token: scoped[i].token });
        expect(page.status).to.equal(200);
        expect(foreign(scoped[i].scope, page.body.events), scoped[i].scope).to.deep.equal([]);
      }
      expect(sys.events().filter((e) => e.type === 'activity').length).to.be.greaterThan(READ_SCOPES.length);
      // Nothing of who may read an event is ever sent.
      expect(sys.got.every((g) => !('acl' in g.event))).to.equal(true);
    } finally {
      for (const s of [...streams, sys]) s.close();
    }
  });

  it('readers that stop reading get lagged and are closed; the daemon does not keep what they did not read', async () => {
    const QUEUE_BYTES = 64 * 1024;
    const READERS = 40;
    d = await startDaemon({
      // Unsynced writes: this measures memory, not durability, and the calls must be many.
      env: {
        HOSTD_STORE_SYNC: '0',
        HOSTD_EVENTS_QUEUE_EVENTS: '64',
        HOSTD_EVENTS_QUEUE_BYTES: String(QUEUE_BYTES),
        HOSTD_EVENTS_MAX_STREAMS_PER_TOKEN: String(READERS),
      },
    });
    const token = await d.token('slow', ['system.read']);
    // Each call writes a refused-call row of about 5 KiB (a long folder id in its target and error;
    // the daemon cuts longer ones shorter), and its event: the bigger the event, the fewer calls.
    const id = 'f_' + 'x'.repeat(3600);
    const admin = d.admin;
    await admin.request('DELETE', `/api/v1/folders/${id}`);
    const first = await eventually(
      async () => {
        const page = await d.request('GET', '/api/v1/events?limit=1000&types=activity', { token });
        expect(page.status, page.text).to.equal(200);
        return page.body.events.findLast((ev: { resource?: string }) => ev.resource?.startsWith('folders/f_xxx'));
      },
      30_000,
      'the event of the first call',
    );
    const eventBytes = JSON.stringify(first).length;
    // What an unbounded daemon would hold is what the readers were offered; this one holds per reader at most its queue and a write buffer.
    const allowed = 64 * 1024 * 1024;
    // A reader that does not read is lagged only once the kernel's buffers of its connection are full
    // (the daemon's socket send buffer, the reader's receive buffer) and the daemon's queue fills
    // behind them: each reader is offered twice what those buffers take (a fixed count of calls
    // offered barely more, and left every reader waiting for a close that never came on a kernel
    // with bigger buffers), and all of them together more than twice the bound.
    const tcp = (name: string) => fs.readFileSync(`/proc/sys/net/ipv4/${name}`, 'utf8').trim().split(/\s+/).map(Number);
    const buffered = tcp('tcp_wmem')[2] + tcp('tcp_rmem')[1];
    const CALLS = Math.ceil(Math.max(2 * buffered, (2.5 * allowed) / READERS) / eventBytes);
    const readers = [];
    for (let i = 0; i < READERS; i++) readers.push(await stalledReader(d, token));
    const before = rss(d.proc.pid!);
    let sent = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (sent < CALLS) {
          sent++;
          await admin.request('DELETE', `/api/v1/folders/${id}`);
        }
      }),
    );
    const after = rss(d.proc.pid!);
    const offered = READERS * CALLS * eventBytes;
    expect(offered, 'the traffic must dwarf the bound for the check to mean anything').to.be.greaterThan(allowed * 2);
    expect(after - before, `RSS grew by ${after - before} bytes for ${offered} bytes offered`).to.be.lessThan(allowed);
    const texts = await Promise.all(readers.map((r) => r.drain()));
    for (const t of texts) {
      // Raw HTTP/1.1 (chunked): each message is one chunk, so its data line is whole.
      const last = t.match(/^data: .*$/gm)?.at(-1) ?? '';
      expect(last, 'the last message of a stalled reader').to.match(/"type":"lagged"/);
    }
  });
});
