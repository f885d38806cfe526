/**
 * The console's containment rows (docs/security.md, "Console"): the session
 * cookie is never accepted on a cross-site request and no CORS setting ever
 * applies to it; a sign-in link works once and expires; a session ends at
 * sign-out; the page is served with a CSP without inline scripts and refuses
 * to be framed; no link or session secret reaches a log line or an activity
 * row; no bearer token manages tokens.
 */
import { expect } from 'chai';
import http from 'node:http';
import { ALL_SCOPES } from '../../../api/registry/index.js';
import { ConsoleSessions } from '../../../daemon/console/sessions.js';
import { hostctl, startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { API, expectError, raw } from '../../helpers/conformance.js';

const ALLOWED_ORIGIN = 'https://dash.lab:8443';

describe('console escalation suite', function () {
  let d: TestDaemon;
  let own: string;
  const secrets: string[] = [];

  before(async function () {
    this.timeout(60_000);
    // A CORS origin is configured: it must change nothing for the cookie.
    d = await startDaemon({ configYaml: `cors_origins:\n  - ${ALLOWED_ORIGIN}\n` });
    own = d.url.replace(/\/$/, '');
  });

  /** A sign-in link's secret, made over the admin socket as hostctl console does. */
  const link = async (): Promise<string> => {
    const r = await d.admin.request('POST', '/admin/console/sign-in');
    expect(r.status).to.equal(201);
    const secret = new URL(r.body.url).hash.replace(/^#sign-in=/, '');
    secrets.push(secret);
    return secret;
  };
  const redeem = (secret: string, headers: Record<string, string> = { 'x-hostd-console': '1', origin: own }) =>
    raw(d.url, 'POST', '/console/session', { body: JSON.stringify({ link: secret }), headers: { 'content-type': 'application/json', ...headers } });
  /** A fresh administrator session's cookie pair (`hostd_console=...`). */
  const session = async (): Promise<string> => {
    const r = await redeem(await link());
    expect(r.status, r.text).to.equal(200);
    const pair = String(r.headers['set-cookie']).split(';')[0];
    secrets.push(pair.split('=')[1]);
    return pair;
  };

  it('hostctl console prints the sign-in URL alone on one line of stdout, pointing at this daemon', async () => {
    const r = await hostctl(d.dataDir, ['console']);
    expect(r.code, r.stderr).to.equal(0);
    const lines = r.stdout.split('\n');
    expect(lines).to.have.length(2);
    expect(lines[1]).to.equal('');
    expect(lines[0].startsWith(`${own}/#sign-in=hsi_`), lines[0]).to.equal(true);
    secrets.push(lines[0].split('#sign-in=')[1]);
  });

  it('the session cookie is HttpOnly, SameSite=Strict, path /, with an expiry, not Secure over plain HTTP', async () => {
    const r = await redeem(await link());
    expect(r.status).to.equal(200);
    const c = String(r.headers['set-cookie']);
    expect(c).to.match(/^hostd_console=hss_[A-Za-z0-9_-]{40,}; /);
    expect(c)
      .to.include('HttpOnly')
      .and.include('SameSite=Strict')
      .and.include('Path=/')
      .and.match(/Max-Age=\d{4,}/);
    expect(c).not.to.include('Secure');
    secrets.push(c.split(';')[0].split('=')[1]);
  });

  it('a sign-in link works once: the second use is refused (401), as is a made-up one', async () => {
    const s = await link();
    expect((await redeem(s)).status).to.equal(200);
    expectError(await redeem(s), 401, 'already used');
    expectError(await redeem('hsi_' + 'A'.repeat(43)), 401, 'already used or was never made');
  });

  it('a sign-in link dies after 10 minutes, and a session at its expiry (the clock moved, nothing waited)', () => {
    let now = 1_000_000;
    const s = new ConsoleSessions(() => now);
    const late = s.createLink();
    expect(late.expiresAt).to.equal(now + 10 * 60_000);
    now += 10 * 60_000;
    expect(s.redeem(late.secret)).to.equal('expired');
    const ok = s.redeem(s.createLink().secret);
    if (typeof ok === 'string') throw new Error(`refused: ${ok}`);
    expect(s.check(ok.secret)).to.equal(ok.expiresAt);
    now = ok.expiresAt;
    expect(s.check(ok.secret)).to.equal('expired');
    expect(s.check(ok.secret)).to.equal('unknown');
  });

  it('the cookie is accepted only on a same-origin request carrying X-Hostd-Console (a cross-site request gets 403)', async () => {
    const cookie = await session();
    const get = (headers: Record<string, string>) => raw(d.url, 'GET', `${API}/folders`, { headers: { cookie, ...headers } });
    expect((await get({ 'x-hostd-console': '1', origin: own, 'sec-fetch-site': 'same-origin' })).status).to.equal(200);
    expect((await get({ 'x-hostd-console': '1' })).status).to.equal(200);
    expectError(await get({}), 403, 'X-Hostd-Console');
    expectError(await get({ 'x-hostd-console': '1', 'sec-fetch-site': 'cross-site' }), 403, 'cross-site');
    expectError(await get({ 'x-hostd-console': '1', 'sec-fetch-site': 'same-site' }), 403, 'same-site');
    expectError(await get({ 'x-hostd-console': '1', origin: 'http://evil.example' }), 403, 'evil.example');
    // The origin CORS allows for bearer tokens is still another origin for the cookie.
    const fromDash = await get({ 'x-hostd-console': '1', origin: ALLOWED_ORIGIN });
    expectError(fromDash, 403, 'dash.lab');
    expect(fromDash.headers['access-control-allow-credentials']).to.equal(undefined);
    // A cross-site form post (no custom header) cannot create anything as the administrator.
    const form = await raw(d.url, 'POST', `${API}/folders`, {
      body: 'storage_id=default&name=x',
      headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', origin: 'http://evil.example', 'sec-fetch-site': 'cross-site' },
    });
    expect(form.status).to.equal(403);
  });

  it('the event stream takes the cookie under the same rules: same origin with the console header, else 403', async () => {
    const cookie = await session();
    const open = (headers: Record<string, string>) =>
      new Promise<number>((resolve, reject) => {
        const u = new URL(d.url);
        const req = http.get(
          { host: u.hostname, port: u.port, path: `${API}/events/stream?types=activity`, headers: { accept: 'text/event-stream', cookie, ...headers } },
          (res) => {
            resolve(res.statusCode!);
            res.destroy();
          },
        );
        req.once('error', reject);
      });
    expect(await open({ 'x-hostd-console': '1' })).to.equal(200);
    expect(await open({})).to.equal(403);
    expect(await open({ 'x-hostd-console': '1', origin: 'http://evil.example' })).to.equal(403);
    expect(await open({ 'x-hostd-console': '1', 'sec-fetch-site': 'cross-site' })).to.equal(403);
  });

  it('no CORS answer ever allows credentials, so no other origin can read a cookie-authenticated answer', async () => {
    const pre = await raw(d.url, 'OPTIONS', `${API}/folders`, {
      headers: { origin: ALLOWED_ORIGIN, 'access-control-request-method': 'GET', 'access-control-request-headers': 'x-hostd-console' },
    });
    expect(pre.headers['access-control-allow-credentials']).to.equal(undefined);
    expect(String(pre.headers['access-control-allow-headers'] ?? '')).not.to.include('x-hostd-console');
    const signIn = await raw(d.url, 'OPTIONS', '/console/session', { headers: { origin: ALLOWED_ORIGIN, 'access-control-request-method': 'POST' } });
    expect(signIn.headers['access-control-allow-origin']).to.equal(undefined);
    expect(signIn.headers['access-control-allow-credentials']).to.equal(undefined);
  });

  it('a sign-in from another origin or without the console header is refused, and the link stays unspent', async () => {
    const s = await link();
    expectError(await redeem(s, { 'x-hostd-console': '1', origin: 'http://evil.example' }), 403, 'evil.example');
    expectError(await redeem(s, {}), 403, 'X-Hostd-Console');
    expect((await redeem(s)).status).to.equal(200);
  });

  it('sign-out ends the session: the same cookie is refused afterwards (401)', async () => {
    const cookie = await session();
    const h = { cookie, 'x-hostd-console': '1' };
    expect((await raw(d.url, 'GET', '/console/session', { headers: h })).status).to.equal(200);
    const out = await raw(d.url, 'DELETE', '/console/session', { headers: h });
    expect(out.status).to.equal(200);
    expect(String(out.headers['set-cookie'])).to.include('Max-Age=0');
    expectError(await raw(d.url, 'GET', `${API}/folders`, { headers: h }), 401, 'sign in again');
  });

  it('the page and its assets carry a CSP without inline scripts and refuse to be framed', async () => {
    for (const p of ['/', '/console/assets/app.js', '/console/assets/app.css']) {
      const r = await raw(d.url, 'GET', p);
      expect(r.status, p).to.equal(200);
      const csp = String(r.headers['content-security-policy']);
      expect(csp).to.include("script-src 'self'").and.include("frame-ancestors 'none'").and.include("default-src 'none'");
      expect(csp).not.to.include('unsafe-inline').and.not.include('unsafe-eval');
      expect(r.headers['x-frame-options']).to.equal('DENY');
      expect(r.headers['x-content-type-options']).to.equal('nosniff');
    }
    const page = await raw(d.url, 'GET', '/');
    expect(page.text).not.to.match(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(page.text).not.to.match(/\son[a-z]+=/i);
  });

  it('no bearer token, even holding every scope, can list, create or revoke tokens (the console has no private API)', async () => {
    const all = await d.token('console-all', [...ALL_SCOPES]);
    expectError(await raw(d.url, 'GET', `${API}/tokens`, { token: all }), 403, 'local administrator');
    expectError(
      await raw(d.url, 'POST', `${API}/tokens`, {
        token: all,
        body: JSON.stringify({ name: 'x', scopes: [] }),
        headers: { 'content-type': 'application/json' },
      }),
      403,
      'local administrator',
    );
    // The console header on a bearer call grants nothing: it only labels the activity row.
    expectError(await raw(d.url, 'GET', `${API}/tokens`, { token: all, headers: { 'x-hostd-console': '1' } }), 403, 'local administrator');
  });

  it('no sign-in link or session secret appears in an activity row or a log line', async () => {
    const rows = await d.admin.request('GET', `${API}/activity?limit=200`);
    const text = JSON.stringify(rows.body) + JSON.stringify(d.logs);
    expect(secrets.length).to.be.greaterThan(5);
    for (const s of secrets) expect(text.includes(s), 'a secret was recorded').to.equal(false);
    const signIns = rows.body.events.filter((e: any) => e.summary === 'Console sign-in with a one-time link');
    expect(signIns.length).to.be.greaterThan(2);
    expect(signIns[0]).to.include({ actor: 'admin', category: 'auth' });
    expect(signIns[0].metadata).to.include({ transport: 'api', client: 'console' });
  });
});
