/**
 * Slow and greedy clients (hardening item 7): an answer given before the body
 * arrived closes the connection instead of reading a trickled body; a body
 * that does not arrive in time is a 408; connections are capped per client
 * address and in total (http_limits in the config file), so that one client's
 * sockets do not starve the others. Clients use other loopback addresses
 * (127.0.0.x) to be other sources.
 */
import { expect } from 'chai';
import net from 'node:net';
import { ALL_SCOPES } from '../../api/registry/index.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { API, raw } from '../helpers/conformance.js';

interface Conn {
  socket: net.Socket;
  /** Everything received so far. */
  text: () => string;
  /** Resolves when the server closed (or reset) the connection. */
  closed: Promise<void>;
  /** Resolves when what was received satisfies `done`, or when the connection closed. */
  received: (done: (text: string) => boolean) => Promise<void>;
  /** Stops the trickle and closes from our side. */
  stop: () => void;
  /**
   * Stops the trickle, ends our side and waits for the connection to close.
   * The server closes its side of an idle connection when it reads our end,
   * and counts the connection out in the same turn of its event loop, before
   * it takes a new connection: after this, its counts no longer hold it.
   */
  hangUp: () => Promise<void>;
}

/** `p`, or a failure naming `what` after `ms` (a generous bound: the machine may be loaded). */
async function within<T>(p: Promise<T>, what: string, ms = 30_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** A raw connection from `from` that sends `head` and then trickles `trickle` one byte per `everyMs`. */
async function connect(port: number, from: string, head: string, trickle = '', everyMs = 100): Promise<Conn> {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: from });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  let got = '';
  const watchers = new Set<() => void>();
  socket.on('data', (c) => {
    got += c.toString('latin1');
    for (const w of watchers) w();
  });
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  if (head) socket.write(head);
  let i = 0;
  const timer = trickle
    ? setInterval(() => {
        if (i >= trickle.length || socket.destroyed) return clearInterval(timer);
        socket.write(trickle[i++]);
      }, everyMs)
    : undefined;
  void closed.then(() => timer && clearInterval(timer));
  const received = (done: (text: string) => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (!done(got)) return;
        watchers.delete(check);
        resolve();
      };
      watchers.add(check);
      check();
      void closed.then(() => {
        watchers.delete(check);
        resolve();
      });
    });
  const stopTrickle = () => timer && clearInterval(timer);
  return {
    socket,
    text: () => got,
    closed,
    received,
    stop: () => {
      stopTrickle();
      socket.destroy();
    },
    hangUp: async () => {
      stopTrickle();
      socket.end();
      await within(closed, 'the server to close its side');
    },
  };
}

const statusOf = (text: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
const headerOf = (text: string, name: string) => new RegExp(`^${name}: (.*)$`, 'im').exec(text)?.[1]?.trim();
const bodyOf = (text: string) => text.slice(text.indexOf('\r\n\r\n') + 4);

/** An idle connection from `from` (no request): closed by the server at once when over a cap. */
function idle(port: number, from: string): Promise<Conn> {
  return connect(port, from, '');
}

const healthRequest = (token: string) => `GET ${API}/system/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`;

/**
 * Sends a request on `c` and resolves with the status of its answer (0:
 * closed without one). Without a token: the 401 is the cheapest answer, and
 * any answer shows that the server holds the connection.
 */
async function ask(c: Conn): Promise<number> {
  const before = c.text().length;
  c.socket.write(`GET ${API}/system/health HTTP/1.1\r\nHost: x\r\n\r\n`);
  await within(
    c.received((t) => answered(t.slice(before))),
    'an answer',
  );
  return statusOf(c.text().slice(before));
}

/** Whether `text` holds a whole answer: its head and as many body bytes as its Content-Length says. */
function answered(text: string): boolean {
  const end = text.indexOf('\r\n\r\n');
  if (end === -1) return false;
  return text.length - end - 4 >= Number(headerOf(text.slice(0, end + 2), 'content-length') ?? 0);
}

/** Resolves when `c` was closed by the server; true when it closed without sending a byte (refused by a cap). */
async function refusedSilently(c: Conn): Promise<boolean> {
  await within(c.closed, 'the connection over the cap to be closed');
  return c.text() === '';
}

describe('slow and greedy clients', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  let port: number;
  let token: string;
  const open: Conn[] = [];

  before(async function () {
    d = await startDaemon({
      configYaml: ['http_limits:', '  max_connections_per_client: 20', '  max_connections: 60', '  body_timeout_ms: 1500', '  close_linger_ms: 500', ''].join(
        '\n',
      ),
    });
    port = Number(new URL(d.url).port);
    token = await d.token('hardening', [...ALL_SCOPES]);
  });

  after(() => d?.stop());

  afterEach(async () => {
    for (const c of open.splice(0)) await c.hangUp();
  });

  const track = <T extends Conn>(c: T): T => {
    open.push(c);
    return c;
  };

  it('answers 401 to a trickled body at once, with Connection: close, and closes instead of reading the rest', async () => {
    // 10,000 bytes at 10 a second would hold the connection for 17 minutes.
    const body = '{' + ' '.repeat(9998) + '}';
    const c = track(
      await connect(
        port,
        '127.0.0.11',
        `POST ${API}/folders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
        body,
      ),
    );
    await c.closed;
    expect(statusOf(c.text())).to.equal(401);
    expect(headerOf(c.text(), 'connection')).to.equal('close');
    expect(JSON.parse(bodyOf(c.text()))).to.deep.equal({ error: 'missing or unknown bearer token' });
  });

  it('the same for MCP, and for 404 and 405 before any body is read', async () => {
    const body = '{' + ' '.repeat(9998) + '}';
    const cases: Array<[string, number]> = [
      [
        `POST /mcp HTTP/1.1\r\nHost: x\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
        401,
      ],
      [`POST ${API}/zz-nope HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${body.length}\r\n\r\n`, 404],
      [`PUT ${API}/folders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Length: ${body.length}\r\n\r\n`, 405],
    ];
    for (const [head, status] of cases) {
      const c = track(await connect(port, '127.0.0.12', head, body));
      await c.closed;
      expect(statusOf(c.text()), head.split('\r\n')[0]).to.equal(status);
      expect(headerOf(c.text(), 'connection'), head.split('\r\n')[0]).to.equal('close');
    }
  });

  it('a body that does not arrive within body_timeout_ms is a 408 naming the limit, and the connection closes', async () => {
    const body = '{' + ' '.repeat(9998) + '}';
    const c = track(
      await connect(
        port,
        '127.0.0.13',
        `POST ${API}/folders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
        body,
      ),
    );
    await c.closed;
    expect(statusOf(c.text())).to.equal(408);
    expect(headerOf(c.text(), 'connection')).to.equal('close');
    expect(JSON.parse(bodyOf(c.text()))).to.deep.equal({ error: 'the request body did not arrive within 1.5 s' });
  });

  it('a complete request answered with an error keeps its connection (keep-alive is not given up for nothing)', async () => {
    const req = `POST ${API}/folders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`;
    const c = track(await connect(port, '127.0.0.14', req + req));
    // Two requests on one connection, both answered 401, and the connection stays open.
    await within(
      c.received((t) => (t.match(/HTTP\/1\.1 401/g) ?? []).length === 2 && answered(t.slice(t.lastIndexOf('HTTP/1.1 401')))),
      'two answers',
    );
    expect((c.text().match(/HTTP\/1\.1 401/g) ?? []).length).to.equal(2);
    expect(headerOf(c.text(), 'connection')).to.equal('keep-alive');
    expect(c.socket.destroyed).to.equal(false);
  });

  it('refuses http_limits it does not know, naming the key', async () => {
    let err: Error | undefined;
    try {
      await startDaemon({ configYaml: 'http_limits:\n  max_conections: 5\n' });
    } catch (e) {
      err = e as Error;
    }
    expect(err?.message).to.contain('http_limits.max_conections is not a setting');
  });
});

/*
 * Connection counts, on a daemon of their own: connections the tests above
 * leave to the server to close are not counted here. Every connection these
 * tests make is hung up (hangUp) before the next test counts, and whether one
 * was held or refused is read from the connection itself (a held one answers a
 * request; a refused one is closed without a byte), never from how much time
 * passed.
 */
describe('connection caps', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let port: number;
  let token: string;
  const open: Conn[] = [];

  before(async function () {
    d = await startDaemon({
      configYaml: [
        'http_limits:',
        '  max_connections_per_client: 20',
        '  max_connections: 60',
        // Idle connections stay held for as long as the tests take to ask them, however loaded the machine.
        '  headers_timeout_ms: 600000',
        '',
      ].join('\n'),
    });
    port = Number(new URL(d.url).port);
    token = await d.token('caps', ['system.read']);
  });

  after(() => d?.stop());

  afterEach(async () => {
    for (const c of open.splice(0)) await c.hangUp();
  });

  const track = (c: Conn): Conn => {
    open.push(c);
    return c;
  };

  it('caps connections per client address: the ones over the cap are closed at once, other clients are served', async () => {
    const conns: Conn[] = [];
    for (let i = 0; i < 30; i++) conns.push(track(await idle(port, '127.0.0.21')));
    // The server takes connections in the order they were made: it holds the first 20 and closes the 10 over the cap without a byte.
    for (const [i, c] of conns.slice(20).entries()) expect(await refusedSilently(c), `connection ${21 + i}`).to.equal(true);
    for (const [i, c] of conns.slice(0, 20).entries()) expect(await ask(c), `connection ${i + 1}`).to.equal(401);
    // Another address is served meanwhile, and so is this one once it holds fewer.
    const other = await raw(`http://127.0.0.1:${port}`, 'GET', `${API}/system/health`, { token });
    expect(other.status).to.equal(200);
    for (const c of conns.slice(0, 5)) await c.hangUp();
    const again = track(await connect(port, '127.0.0.21', healthRequest(token)));
    await within(again.received(answered), 'an answer');
    expect(statusOf(again.text())).to.equal(200);
  });

  it('caps connections in total', async () => {
    const conns: Conn[] = [];
    // 15 each from four addresses: 60, the total cap; all held.
    for (let a = 0; a < 4; a++) for (let i = 0; i < 15; i++) conns.push(track(await idle(port, `127.0.0.${31 + a}`)));
    for (const [i, c] of conns.entries()) expect(await ask(c), `connection ${i + 1}`).to.equal(401);
    const over = track(await idle(port, '127.0.0.40'));
    expect(await refusedSilently(over), 'a connection over the total cap is dropped').to.equal(true);
    for (const c of conns.slice(0, 10)) await c.hangUp();
    expect((await raw(`http://127.0.0.1:${port}`, 'GET', `${API}/system/health`, { token })).status).to.equal(200);
  });
});

describe('1,100 trickling unauthenticated sockets (default limits)', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let token: string;
  const conns: Conn[] = [];

  before(async function () {
    d = await startDaemon();
    token = await d.token('legit', ['system.read']);
  });

  after(async () => {
    for (const c of conns.splice(0)) c.stop();
    await d?.stop();
  });

  it('do not make legitimate requests from another client fail', async () => {
    const port = Number(new URL(d.url).port);
    const body = '{' + ' '.repeat(998) + '}';
    const head = `POST ${API}/folders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`;
    for (let i = 0; i < 1100; i++) {
      try {
        conns.push(await connect(port, '127.0.0.51', head, body, 1000));
      } catch {
        /* refused at connect: the cap at work */
      }
    }
    // A legitimate client (another address) is served, repeatedly.
    for (let i = 0; i < 20; i++) {
      const r = await raw(`http://127.0.0.1:${port}`, 'GET', `${API}/system/health`, { token, timeoutMs: 10_000 });
      expect(r.status).to.equal(200);
    }
    // And the flood holds nothing for long: the server closes every one of its
    // connections itself, over the per-client cap without a byte, the others
    // after their 401 (the cap itself is counted in 'connection caps').
    for (const [i, c] of conns.entries()) {
      await within(c.closed, `flood connection ${i + 1} to be closed by the server`, 60_000);
      const status = statusOf(c.text());
      expect(
        c.text() === '' || (status === 401 && headerOf(c.text(), 'connection') === 'close'),
        `flood connection ${i + 1}: ${c.text().slice(0, 80)}`,
      ).to.equal(true);
    }
  });
});
