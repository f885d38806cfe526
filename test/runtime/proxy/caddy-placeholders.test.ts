/**
 * The placeholder rule (daemon/proxy/policy/placeholders.ts) held to the
 * real Caddy: a Caddy of our own on loopback, with a sentinel in its
 * environment, proxies one request to a loopback upstream that records the
 * headers it got. It shows what the rule relies on:
 *  - the families the rule refuses do reach the host through this Caddy
 *    (`{env.*}`, `{system.hostname}`), so refusing them is needed;
 *  - every value the rule accepts arrives without anything of the host,
 *    also when the client's own header holds a placeholder;
 *  - escaped braces arrive as literal braces (what caddyLiteral relies on,
 *    also in a static response body, which Caddy expands);
 *  - Caddyfile shorthands (`{host}`, `{path}`) are not expanded in JSON
 *    configuration (the rule refuses them, naming the long form);
 *  - an unknown placeholder is left in place and one nested in it expands
 *    (`{x{env.X}}`), which is why every `{` must open an allowed key.
 * Traffic: loopback only.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { CaddyAdmin } from '../../../daemon/proxy/caddy/admin.js';
import { caddyLiteral, placeholderProblem } from '../../../daemon/proxy/policy/placeholders.js';
import { eventually } from '../../helpers/daemon.js';
import { proxyAvailability } from '../../helpers/proxy-node.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });

const get = (port: number, p: string) =>
  new Promise<{ status: number; body: string }>((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: p, headers: { host: 'caddy.test', 'x-client': 'c-1', 'x-evil': '{env.HOSTD_SENTINEL}' } }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });

describe('Caddy placeholders (the real Caddy, loopback)', function () {
  this.timeout(60_000);
  const SENTINEL = `sentinel-${crypto.randomBytes(12).toString('hex')}`;
  let dir: string;
  let caddy: ChildProcess | null = null;
  let upstream: http.Server;
  let seen: http.IncomingHttpHeaders[] = [];
  let admin: CaddyAdmin;
  let caddyPort: number;

  // Header name -> value; the upstream sees `x-case-<i>`.
  const accepted = [
    '{http.request.host}',
    'for={http.request.remote.host};m={http.request.method}',
    '{http.request.header.X-Client}',
    '{http.request.header.X-Evil}',
    '{http.request.uri.path}',
    '\\{env.HOSTD_SENTINEL}',
    'lit \\{system.hostname\\} end',
    '}',
    'plain',
  ];
  const refused = [
    '{env.HOSTD_SENTINEL}',
    'x{env.HOME}',
    '{system.hostname}',
    '{host}',
    '{path}',
    '{file./etc/hostname}',
    '{x{env.HOSTD_SENTINEL}}',
    '{time.now.year}',
  ];

  before(async function () {
    await requireRuntime(this, 'proxy', proxyAvailability, { need: ['caddy'] });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-caddy-ph-'));
    upstream = http.createServer((req, res) => {
      seen.push(req.headers);
      res.end('ok');
    });
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', () => r()));
    const sock = path.join(dir, 'admin.sock');
    const boot = path.join(dir, 'boot.json');
    fs.writeFileSync(
      boot,
      JSON.stringify({ admin: { listen: `unix/${sock}`, config: { persist: false } }, storage: { module: 'file_system', root: path.join(dir, 'storage') } }),
    );
    caddy = spawn('caddy', ['run', '--config', boot], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', HOME: dir, HOSTD_SENTINEL: SENTINEL },
      stdio: ['ignore', 'ignore', 'ignore'],
    });
    admin = new CaddyAdmin(sock);
    await eventually(() => admin.ping(), 15_000, "Caddy's admin socket");
    caddyPort = await freePort();
    const set: Record<string, string[]> = {};
    [...accepted, ...refused].forEach((v, i) => (set[`X-Case-${i}`] = [v]));
    const up = (upstream.address() as net.AddressInfo).port;
    await admin.load({
      admin: { listen: `unix/${sock}`, config: { persist: false } },
      storage: { module: 'file_system', root: path.join(dir, 'storage') },
      apps: {
        http: {
          servers: {
            t: {
              listen: [`127.0.0.1:${caddyPort}`],
              automatic_https: { disable: true },
              routes: [
                {
                  match: [{ path: ['/stub'] }],
                  handle: [
                    { handler: 'static_response', status_code: 502, body: caddyLiteral(`hostd proxy: target 'vm:{env.HOSTD_SENTINEL}' \\{x} not found`) },
                  ],
                  terminal: true,
                },
                { handle: [{ handler: 'reverse_proxy', upstreams: [{ dial: `127.0.0.1:${up}` }], headers: { request: { set } } }] },
              ],
            },
          },
        },
      },
    });
  });

  after(async () => {
    if (caddy && caddy.exitCode === null) {
      const gone = new Promise((r) => caddy!.once('exit', r));
      caddy.kill('SIGTERM');
      await gone;
    }
    await new Promise((r) => (upstream ? upstream.close(r) : r(undefined)));
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('the rule accepts exactly the request placeholders and escapes of this corpus', () => {
    for (const v of accepted) expect(placeholderProblem(v), v).to.equal(null);
    for (const v of refused) expect(placeholderProblem(v), v).to.not.equal(null);
  });

  it('what the rule refuses does reach the host through Caddy; what it accepts does not', async () => {
    seen = [];
    const r = await get(caddyPort, '/p/q');
    expect(r.status).to.equal(200);
    const h = seen[0];
    const at = (v: string) => h[`x-case-${[...accepted, ...refused].indexOf(v)}`];
    // Refused: the sentinel in Caddy's environment and the host name arrive at the upstream.
    expect(at('{env.HOSTD_SENTINEL}')).to.equal(SENTINEL);
    expect(at('x{env.HOME}')).to.equal(`x${dir}`);
    expect(at('{system.hostname}')).to.equal(os.hostname());
    // Header values go through ReplaceKnown: an unknown placeholder stays, and one nested in it expands.
    expect(at('{x{env.HOSTD_SENTINEL}}')).to.equal(`{x${SENTINEL}}`);
    // Accepted: the request's own values, and literal braces where they were escaped.
    expect(at('{http.request.host}')).to.equal('caddy.test');
    expect(at('for={http.request.remote.host};m={http.request.method}')).to.equal('for=127.0.0.1;m=GET');
    expect(at('{http.request.header.X-Client}')).to.equal('c-1');
    // A client's header holding a placeholder is substituted as it is, never expanded again.
    expect(at('{http.request.header.X-Evil}')).to.equal('{env.HOSTD_SENTINEL}');
    expect(at('{http.request.uri.path}')).to.equal('/p/q');
    expect(at('\\{env.HOSTD_SENTINEL}')).to.equal('{env.HOSTD_SENTINEL}');
    expect(at('lit \\{system.hostname\\} end')).to.equal('lit {system.hostname} end');
    for (const v of accepted) {
      expect(String(at(v)), v).to.not.include(SENTINEL);
      expect(String(at(v)), v).to.not.include(dir);
      expect(at(v), v).to.not.equal(os.hostname());
    }
    // Caddyfile shorthands mean nothing in JSON: they arrive as written (refused by the rule, naming the long form).
    expect(at('{host}')).to.equal('{host}');
    expect(at('{path}')).to.equal('{path}');
  });

  it('a static response body is expanded by Caddy; escaped by caddyLiteral it arrives as written', async () => {
    const r = await get(caddyPort, '/stub');
    expect(r.status).to.equal(502);
    expect(r.body).to.equal("hostd proxy: target 'vm:{env.HOSTD_SENTINEL}' \\{x} not found");
    expect(r.body).to.not.include(SENTINEL);
  });
});
