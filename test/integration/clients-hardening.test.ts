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
  /** Stops the trickle and closes from our side. */
  stop: () => void;
}

/** A raw connection from `from` that sends `head` and then trickles `trickle` one byte per `everyMs`. */
async function connect(port: number, from: string, head: string, trickle = '', everyMs = 100): Promise<Conn> {
  const socket = net.connect({ host: '127.0.0.1', port, localAddress: from });
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  let got = '';
  socket.on('data', (c) => (got += c.toString('latin1')));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.write(head);
  let i = 0;
  const timer = trickle ? setInterval(() => {
    if (i >= trickle.length || socket.destroyed) return clearInterval(timer);
    socket.write(trickle[i++]);
  }, everyMs) : undefined;
  void closed.then(() => timer && clearInterval(timer));
  return { socket, text: () => got, closed, stop: () => { if (timer) clearInterval(timer); socket.destroy(); } };
}

const statusOf = (text: string) => Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
const headerOf = (text: string, name: string) => new RegExp(`^${name}: (.*)$`, 'im').exec(text)?.[1]?.trim();
const bodyOf = (text: string) => text.slice(text.indexOf('\r\n\r\n') + 4);

/** An idle connection from `from` (no request): closed by the server at once when over a cap. */
async function idle(port: number, from: string): Promise<Conn & { refused: () => boolean }> {
  const c = await connect(port, from, '');
  let isClosed = false;
  void c.closed.then(() => (isClosed = true));
  return { ...c, refused: () => isClosed };
}

describe('slow and greedy clients', function () {
  this.timeout(60_000);
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
        '  body_timeout_ms: 1500',
        '  close_linger_ms: 500',
        '',
      ].join('\n'),
    });
    port = Number(new URL(d.url).port);
    token = await d.token('hardening', [...ALL_SCOPES]);
  });

  afterEach(async () => {
    for (const c of open.splice(0)) c.stop();
    // Let the server see the closes before the next test counts connections.
    await new Promise((r) => setTimeout(r, 200));
  });

  const track = <T extends Conn>(c: T): T => {
    open.push(c);
    return c;
  };

  it('answers 401 to a trickled body at once, with Connection: close, and closes instead of reading the rest', async () => {
    // 10,000 bytes at 10 a second would hold the connection for 17 minutes.
    const body = '{' + ' '.repeat(9998) + '}';
    const c = track(await connect(port, '127.0.0.11', `POST ${API}/folders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`, body));
    await c.closed;
    expect(statusOf(c.text())).to.equal(401);
    expect(headerOf(c.text(), 'connection')).to.equal('close');
    expect(JSON.parse(bodyOf(c.text()))).to.deep.equal({ error: 'missing or unknown bearer token' });
  });

  it('the same for MCP, and for 404 and 405 before any body is read', async () => {
    const body = '{' + ' '.repeat(9998) + '}';
    const cases: Array<[string, number]> = [
      [`POST /mcp HTTP/1.1\r\nHost: x\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`, 401],
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
    const c = track(await connect(port, '127.0.0.13', `POST ${API}/folders HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`, body));
    await c.closed;
    expect(statusOf(c.text())).to.equal(408);
    expect(headerOf(c.text(), 'connection')).to.equal('close');
    expect(JSON.parse(bodyOf(c.text()))).to.deep.equal({ error: 'the request body did not arrive within 1.5 s' });
  });

  it('a complete request answered with an error keeps its connection (keep-alive is not given up for nothing)', async () => {
    const req = `POST ${API}/folders HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}`;
    const c = track(await connect(port, '127.0.0.14', req + req));
    // Two requests on one connection, both answered 401, and the connection stays open.
    for (let i = 0; i < 50 && (c.text().match(/HTTP\/1\.1 401/g) ?? []).length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    expect((c.text().match(/HTTP\/1\.1 401/g) ?? []).length).to.equal(2);
    expect(headerOf(c.text(), 'connection')).to.equal('keep-alive');
    expect(c.socket.destroyed).to.equal(false);
  });

  it('caps connections per client address: the ones over the cap are closed at once, other clients are served', async () => {
    const conns = [];
    for (let i = 0; i < 30; i++) conns.push(track(await idle(port, '127.0.0.21')));
    await new Promise((r) => setTimeout(r, 300));
    expect(conns.filter((c) => c.refused()).length).to.equal(10);
    // Another address is served meanwhile, and so is this one once it holds fewer.
    const other = await raw(`http://127.0.0.1:${port}`, 'GET', `${API}/system/health`, { token });
    expect(other.status).to.equal(200);
    for (const c of conns.slice(0, 5)) c.stop();
    await new Promise((r) => setTimeout(r, 200));
    const again = track(await connect(port, '127.0.0.21', `GET ${API}/system/health HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\n\r\n`));
    for (let i = 0; i < 50 && !statusOf(again.text()); i++) await new Promise((r) => setTimeout(r, 50));
    expect(statusOf(again.text())).to.equal(200);
  });

  it('caps connections in total', async () => {
    const conns = [];
    // 15 each from four addresses: 60, the total cap.
    for (let a = 0; a < 4; a++) for (let i = 0; i < 15; i++) conns.push(track(await idle(port, `127.0.0.${31 + a}`)));
    await new Promise((r) => setTimeout(r, 300));
    expect(conns.filter((c) => c.refused()).length).to.equal(0);
    const over = track(await idle(port, '127.0.0.40'));
    await Promise.race([over.closed, new Promise((r) => setTimeout(r, 2000))]);
    expect(over.refused(), 'a connection over the total cap is dropped').to.equal(true);
    for (const c of conns.slice(0, 10)) c.stop();
    await new Promise((r) => setTimeout(r, 200));
    expect((await raw(`http://127.0.0.1:${port}`, 'GET', `${API}/system/health`, { token })).status).to.equal(200);
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

describe('1,100 trickling unauthenticated sockets (default limits)', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let token: string;
  const conns: Conn[] = [];

  before(async function () {
    d = await startDaemon();
    token = await d.token('legit', ['system.read']);
  });

  after(() => {
    for (const c of conns.splice(0)) c.stop();
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
    // And the flood holds at most the per-client cap: the rest were closed, by the cap or after their 401.
    await new Promise((r) => setTimeout(r, 500));
    const stillOpen = conns.filter((c) => !c.socket.destroyed && c.socket.readyState === 'open').length;
    expect(stillOpen).to.be.at.most(128);
  });
});
