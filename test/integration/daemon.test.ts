/**
 * The daemon as `npm start` runs it (issue 2, item 1): node dist/daemon/main.js
 * configured by HOSTD_HTTP_ADDR, HOSTD_DATA_DIR and HOSTD_CONFIG (a YAML file
 * with two storage pools); one structured log line per request; one daemon per
 * data dir; a clean stop on SIGTERM.
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { MAIN, eventually, onFreePorts, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { API, raw } from '../helpers/conformance.js';

describe('hostd daemon process', function () {
  let d: TestDaemon;
  let dir: string;
  let pool1: string;
  let pool2: string;
  let port: number;
  let token: string;

  before(async function () {
    this.timeout(60_000);
    dir = tempDir('hostd-daemon-');
    const pools = tempDir('hostd-pools-');
    pool1 = path.join(pools, 'fast');
    pool2 = path.join(pools, 'bulk');
    // The test names the port: one that was free, again with another if something took it meanwhile.
    d = await onFreePorts(
      1,
      ([p]) => (
        (port = p),
        startDaemon({
          dataDir: dir,
          httpAddr: `127.0.0.1:${p}`,
          configYaml: [
            'storage_pools:',
            `  - id: fast`,
            `    path: ${JSON.stringify(pool1)}`,
            `    name: Fast SSD`,
            `  - id: bulk`,
            `    path: ${JSON.stringify(pool2)}`,
            '',
          ].join('\n'),
        })
      ),
    );
    token = await d.token('daemon-test', ['system.read', 'files.read', 'files.manage']);
  });

  it('listens on HOSTD_HTTP_ADDR and keeps its data in HOSTD_DATA_DIR', async () => {
    expect(d.url).to.equal(`http://127.0.0.1:${port}`);
    expect(fs.statSync(path.join(dir, 'hostd.sock')).isSocket()).to.equal(true);
    expect(fs.existsSync(path.join(dir, 'db'))).to.equal(true);
    expect((await d.request('GET', `${API}/system/health`, { token })).status).to.equal(200);
  });

  it('reports both configured pools in /system/health and creates folders in each', async () => {
    const h = await d.request('GET', `${API}/system/health`, { token });
    const ids = (h.body.pools as Array<{ storage_id: string; path: string; total_bytes: number | null }>).map((p) => p.storage_id);
    expect(ids).to.have.members(['fast', 'bulk']);
    for (const p of h.body.pools) expect(p.total_bytes, p.storage_id).to.be.a('number').and.greaterThan(0);
    for (const [pool, dirPath] of [
      ['fast', pool1],
      ['bulk', pool2],
    ]) {
      const r = await d.request('POST', `${API}/folders`, { token, body: { storage_id: pool, name: `in-${pool}` } });
      expect(r.status, JSON.stringify(r.body)).to.equal(201);
      expect(r.body.folder.storage_id).to.equal(pool);
      expect(fs.statSync(path.join(dirPath, `in-${pool}`)).isDirectory()).to.equal(true);
    }
    const none = await d.request('POST', `${API}/folders`, { token, body: { storage_id: 'default', name: 'x' } });
    expect(none.status, 'no default pool when pools are configured').to.equal(404);
  });

  it('logs one structured JSON line per request: req_id, method, path, status, and never the query string', async () => {
    const marker = 'QSECRETmarker42';
    const calls: Array<[string, string, number]> = [
      ['GET', `${API}/folders?peer_id=${marker}`, 404],
      ['GET', `${API}/folders`, 200],
      ['POST', `${API}/folders?x=${marker}`, 400],
      ['GET', `${API}/nope?${marker}=1`, 404],
      ['PUT', `${API}/folders`, 405],
      ['GET', `${API}/system/health`, 200],
    ];
    const ids: string[] = [];
    for (const [i, [m, p, status]] of calls.entries()) {
      const id = `logtest-${i}-${Date.now()}`;
      ids.push(id);
      const r = await raw(d.url, m, p, { token, headers: { 'x-request-id': id }, body: m === 'POST' ? '{}' : undefined });
      expect(r.status, `${m} ${p}`).to.equal(status);
      expect(r.headers['x-request-id']).to.equal(id);
    }
    const unauth = await raw(d.url, 'GET', `${API}/folders`, { headers: { 'x-request-id': 'logtest-unauth' } });
    expect(unauth.status).to.equal(401);
    expect(unauth.headers['www-authenticate'], 'a 401 names the scheme (RFC 6750)').to.equal('Bearer realm="hostd"');
    ids.push('logtest-unauth');
    let lines: any[] = [];
    await eventually(() => (lines = d.logs.filter((l) => ids.includes(l.req_id))).length >= ids.length, 30_000, 'the request lines in the log');
    for (const [i, id] of ids.entries()) {
      const mine = lines.filter((l) => l.req_id === id);
      expect(mine, `log lines for ${id}`).to.have.length(1);
      const l = mine[0];
      const expected = i < calls.length ? calls[i] : (['GET', `${API}/folders`, 401] as const);
      expect(l).to.include({ method: expected[0], path: expected[1].split('?')[0], status: expected[2] });
      expect(l.time).to.be.a('number');
      expect(l.level).to.be.a('number');
    }
    expect(JSON.stringify(d.logs)).to.not.contain(marker);
    // Without a given id, the daemon makes one, distinct per request.
    const a = await raw(d.url, 'GET', `${API}/folders`, { token });
    const b = await raw(d.url, 'GET', `${API}/folders`, { token });
    expect(a.headers['x-request-id']).to.be.a('string').and.not.equal(b.headers['x-request-id']);
  });

  it('a second daemon on the same data dir fails to start, naming the data dir; the first keeps serving', async () => {
    let err: Error | undefined;
    try {
      await startDaemon({ dataDir: dir });
    } catch (e) {
      err = e as Error;
    }
    expect(err, 'the second daemon started').to.not.equal(undefined);
    expect(err!.message).to.contain(dir);
    expect(err!.message).to.match(/exited with [1-9]/);
    expect((await d.request('GET', `${API}/system/health`, { token })).status).to.equal(200);
    expect(fs.existsSync(d.socket), 'the first daemon keeps its socket').to.equal(true);
    const r = await d.admin.request('GET', '/admin/tokens');
    expect(r.status).to.equal(200);
  });

  it('SIGTERM stops it cleanly (exit 0) and removes the socket', async function () {
    this.timeout(30_000);
    d.proc.kill('SIGTERM');
    const code = await d.exited;
    expect(code).to.equal(0);
    expect(fs.existsSync(path.join(dir, 'hostd.sock'))).to.equal(false);
    expect(d.logs.some((l) => l.msg === 'hostd stopping' && l.signal === 'SIGTERM')).to.equal(true);
    // And it starts again on the same data dir, with its tokens.
    const again = await startDaemon({ dataDir: dir, configYaml: `storage_pools:\n  - id: fast\n    path: ${JSON.stringify(pool1)}\n` });
    const list = await again.request('GET', `${API}/folders`, { token });
    expect(list.status).to.equal(200);
    expect(list.body.folders.map((f: { name: string }) => f.name)).to.include('in-fast');
  });

  it('without HOSTD_DATA_DIR keeps its data in ./data, and a default pool under it', async function () {
    this.timeout(30_000);
    const cwd = tempDir('hostd-cwd-');
    const env: Record<string, string> = { ...(process.env as Record<string, string>), HOSTD_HTTP_ADDR: '127.0.0.1:0', HOSTD_CLUSTER_ADDR: '127.0.0.1:0' };
    delete env.HOSTD_DATA_DIR;
    // Set but empty: no config file, not even a host's /etc/hostd/config.yaml.
    env.HOSTD_CONFIG = '';
    const proc: ChildProcess = spawn(process.execPath, [MAIN], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    proc.stderr!.on('data', (c) => (stderr += c));
    try {
      const listening = await new Promise<any>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error('did not start')), 20_000);
        readline.createInterface({ input: proc.stdout! }).on('line', (line) => {
          try {
            const rec = JSON.parse(line);
            if (rec.msg === 'hostd listening') {
              clearTimeout(t);
              resolve(rec);
            }
          } catch {
            /* not JSON */
          }
        });
        proc.once('exit', (c) => reject(new Error(`exited ${c}: ${stderr}`)));
      });
      expect((await raw(listening.http, 'GET', `${API}/openapi.json`)).status).to.equal(200);
      expect(listening.socket).to.equal(path.join(cwd, 'data', 'hostd.sock'));
      expect(listening.pools).to.deep.equal(['default']);
      expect(fs.statSync(path.join(cwd, 'data', 'pools', 'default')).isDirectory()).to.equal(true);
    } finally {
      if (proc.exitCode === null && proc.signalCode === null) {
        const exited = new Promise((r) => proc.once('exit', r));
        proc.kill('SIGTERM');
        await exited;
      }
    }
    expect([proc.exitCode, proc.signalCode], stderr).to.deep.equal([0, null]);
    expect(fs.existsSync(path.join(cwd, 'data', 'hostd.sock'))).to.equal(false);
  });
});
