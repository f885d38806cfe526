/**
 * The optional TLS listener (`https_addr` with a certificate and key from
 * files): the same API and console over HTTPS beside the plain listener; the
 * session cookie is `Secure` there; `console_url` makes `hostctl console`
 * print links for it; a missing file stops the start naming the setting.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { hostctl, runCommand, startDaemon, tempDir, type TestDaemon } from '../../helpers/daemon.js';

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

function get(url: string, ca: Buffer, opts: { method?: string; headers?: Record<string, string>; body?: string } = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request(url, { method: opts.method ?? 'GET', ca, headers: opts.headers }, (res) => {
      let text = '';
      res.on('data', (c) => (text += c));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, text }));
    });
    req.once('error', reject);
    req.end(opts.body);
  });
}

describe('console and API over the TLS listener (https_addr)', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  let dir: string;
  let cert: Buffer;
  let base: string;

  before(async () => {
    dir = tempDir('hostd-https-');
    const r = await runCommand('openssl', [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      '/CN=127.0.0.1',
      '-addext',
      'subjectAltName=IP:127.0.0.1',
      '-keyout',
      path.join(dir, 'key.pem'),
      '-out',
      path.join(dir, 'cert.pem'),
    ]);
    expect(r.code, r.stderr).to.equal(0);
    cert = fs.readFileSync(path.join(dir, 'cert.pem'));
    // The port is chosen by the system; console_url names a fixed one, which only the printed link uses.
    d = await startDaemon({
      dataDir: path.join(dir, 'data'),
      configYaml: `https_addr: 127.0.0.1:0\nhttps_cert_file: ${dir}/cert.pem\nhttps_key_file: ${dir}/key.pem\nconsole_url: https://console.lab:8443\n`,
    });
    base = d.listening.https;
    expect(base).to.match(/^https:\/\/127\.0\.0\.1:\d+$/);
  });

  it('serves the console page and the API over TLS, with the same headers', async () => {
    const page = await get(`${base}/`, cert);
    expect(page.status).to.equal(200);
    expect(String(page.headers['content-security-policy'])).to.include("frame-ancestors 'none'");
    const token = await d.token('over-tls', ['files.read']);
    const api = await get(`${base}/api/v1/folders`, cert, { headers: { authorization: `Bearer ${token}` } });
    expect(api.status, api.text).to.equal(200);
    // The plain listener still answers beside it.
    expect((await d.request('GET', '/api/v1/folders', { token })).status).to.equal(200);
  });

  it('hostctl console prints a link under console_url, and the session cookie is Secure over TLS', async () => {
    const out = await hostctl(d.dataDir, ['console']);
    expect(out.code, out.stderr).to.equal(0);
    expect(out.stdout.trim()).to.match(/^https:\/\/console\.lab:8443\/#sign-in=hsi_/);
    const secret = out.stdout.trim().split('#sign-in=')[1];
    const r = await get(`${base}/console/session`, cert, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-hostd-console': '1' },
      body: JSON.stringify({ link: secret }),
    });
    expect(r.status, r.text).to.equal(200);
    const c = String(r.headers['set-cookie']);
    expect(c).to.include('; Secure').and.include('HttpOnly').and.include('SameSite=Strict');
  });

  it('a missing certificate file stops the start, naming the setting', async () => {
    const r = await runCommand(process.execPath, [path.join(process.cwd(), 'dist/daemon/main.js')], {
      env: {
        ...(process.env as Record<string, string>),
        HOSTD_DATA_DIR: path.join(dir, 'data2'),
        HOSTD_HTTP_ADDR: '127.0.0.1:0',
        HOSTD_CLUSTER_ADDR: '127.0.0.1:0',
        HOSTD_CONFIG: writeConfig(`https_addr: 127.0.0.1:0\nhttps_cert_file: ${dir}/nope.pem\nhttps_key_file: ${dir}/key.pem\n`),
      },
      timeoutMs: 30_000,
    });
    expect(r.code).not.to.equal(0);
    expect(r.stdout + r.stderr).to.include('https_cert_file');
  });

  it('https_addr without its files is a config error naming them', async () => {
    const r = await runCommand(process.execPath, [path.join(process.cwd(), 'dist/daemon/main.js')], {
      env: {
        ...(process.env as Record<string, string>),
        HOSTD_DATA_DIR: path.join(dir, 'data3'),
        HOSTD_HTTP_ADDR: '127.0.0.1:0',
        HOSTD_CLUSTER_ADDR: '127.0.0.1:0',
        HOSTD_CONFIG: writeConfig('https_addr: 127.0.0.1:0\n'),
      },
      timeoutMs: 30_000,
    });
    expect(r.code).not.to.equal(0);
    expect(r.stdout + r.stderr).to.include('https_cert_file and https_key_file');
  });

  let n = 0;
  function writeConfig(text: string): string {
    const f = path.join(dir, `config-${++n}.yaml`);
    fs.writeFileSync(f, text);
    return f;
  }
});
