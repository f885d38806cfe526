/**
 * CORS: a page on an origin named in `cors_origins` may call the API with a
 * bearer token; no other origin gets an allowing header; no answer ever
 * allows credentials (so no cookie is ever sent cross-origin through it);
 * the config refuses anything but exact origins; without the setting no
 * CORS header is sent at all.
 */
import { expect } from 'chai';
import { hostctl, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { API, raw } from '../helpers/conformance.js';
import { parseOrigin } from '../../daemon/lib/origin.js';

describe('CORS for bearer-token browser clients (cors_origins)', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let dir: string;
  let token: string;
  const ALLOWED = 'https://dash.lab:8443';

  before(async () => {
    dir = tempDir('hostd-cors-');
    d = await startDaemon({ dataDir: dir, configYaml: `cors_origins:\n  - https://DASH.lab:8443\n  - http://127.0.0.1:80\n` });
    const r = await hostctl(dir, ['token', 'create', '--name', 'page', '--scopes', 'files.read']);
    expect(r.code, r.stderr).to.equal(0);
    token = r.stdout.trim();
  });
  after(async () => {
    await d?.stop();
  });

  it('a preflight from an allowed origin is answered with the methods and headers a page needs, never credentials', async () => {
    const r = await raw(d.url, 'OPTIONS', `${API}/folders`, {
      headers: { origin: ALLOWED, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
    });
    expect(r.status).to.equal(204);
    expect(r.headers).to.include({ 'access-control-allow-origin': ALLOWED, 'access-control-max-age': '600', vary: 'Origin' });
    expect(r.headers['access-control-allow-methods']).to.include('POST');
    expect(r.headers['access-control-allow-headers']).to.include('authorization');
    expect(r.headers).to.not.have.property('access-control-allow-credentials');
  });

  it("an allowed origin's calls carry the allowing header (errors too); another origin's never do", async () => {
    const ok = await raw(d.url, 'GET', `${API}/folders`, { token, headers: { origin: ALLOWED } });
    expect(ok.status).to.equal(200);
    expect(ok.headers).to.include({ 'access-control-allow-origin': ALLOWED });
    expect(ok.headers['access-control-expose-headers']).to.include('x-request-id');
    expect(ok.headers).to.not.have.property('access-control-allow-credentials');
    const denied = await raw(d.url, 'GET', `${API}/folders`, { headers: { origin: ALLOWED } });
    expect(denied.status).to.equal(401);
    expect(denied.headers).to.include({ 'access-control-allow-origin': ALLOWED, 'www-authenticate': 'Bearer realm="hostd"' });
    // The default port is left out of Origin by browsers; the config's http://127.0.0.1:80 matches http://127.0.0.1.
    expect((await raw(d.url, 'GET', `${API}/folders`, { token, headers: { origin: 'http://127.0.0.1' } })).headers).to.include({
      'access-control-allow-origin': 'http://127.0.0.1',
    });
    for (const origin of ['https://evil.lab', 'https://dash.lab', 'http://dash.lab:8443', 'null']) {
      const r = await raw(d.url, 'GET', `${API}/folders`, { token, headers: { origin } });
      expect(r.headers, origin).to.not.have.property('access-control-allow-origin');
      const pre = await raw(d.url, 'OPTIONS', `${API}/folders`, { headers: { origin, 'access-control-request-method': 'GET' } });
      expect(pre.headers, origin).to.not.have.property('access-control-allow-origin');
    }
  });

  it('without cors_origins no CORS header is sent', async () => {
    const plain = await startDaemon({ dataDir: tempDir('hostd-cors-off-') });
    try {
      const r = await raw(plain.url, 'OPTIONS', `${API}/folders`, { headers: { origin: ALLOWED, 'access-control-request-method': 'GET' } });
      expect(Object.keys(r.headers).filter((h) => h.startsWith('access-control-'))).to.deep.equal([]);
    } finally {
      await plain.stop();
    }
  });

  it('the config takes exact origins only: no wildcard, path or other scheme; a bad one stops the start naming it', async () => {
    expect(parseOrigin('HTTPS://Dash.Lab:443', 'o')).to.equal('https://dash.lab');
    expect(parseOrigin('http://[::1]:8080', 'o')).to.equal('http://[::1]:8080');
    for (const bad of [
      '*',
      'https://*.lab',
      'https://dash.lab/',
      'https://dash.lab/app',
      'file://x',
      'dash.lab',
      'https://dash.lab:0',
      'https://dash.lab:70000',
      'https://u@dash.lab',
    ]) {
      expect(() => parseOrigin(bad, 'cors_origins[0]'), bad).to.throw(`cors_origins[0] '${bad}' must be an origin`);
    }
    const bad = await startDaemon({ dataDir: tempDir('hostd-cors-bad-'), configYaml: 'cors_origins: ["*"]\n' }).then(
      () => null,
      (e: Error) => e,
    );
    expect(bad?.message).to.include("cors_origins[0] '*' must be an origin");
  });
});
