/**
 * Bad input never crashes the daemon or leaves half-written state (issue 2,
 * last paragraph). Every endpoint of the registry gets malformed JSON, 2 MiB
 * bodies, deeply nested JSON, odd unicode, weird query strings and weird
 * paths; only client errors come back, never a 5xx and never a hang. Then a daemon is
 * killed with SIGKILL in the middle of a burst of folder creates and restarted:
 * records and directories agree.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import type { Operation } from '../../api/registry/types.js';
import { ALL_SCOPES, isGreedyParam, operations } from '../../api/registry/index.js';
import { startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import {
  API,
  Problems,
  callFor,
  concretePath,
  minimalArgs,
  pathValues,
  pool,
  primaryType,
  props,
  raw,
  show,
  takesBody,
  typesOf,
  runtimeMissing,
  unavailableDomains,
  type RawReply,
  absentUpstream,
} from '../helpers/conformance.js';

const MIB = 1048576;

/** Strings that are valid JSON text but unusual: each goes into every string argument. */
const ODD: Array<[string, string]> = [
  ['lone high surrogate', 'a\ud800b'],
  ['lone low surrogate', '\udc00'],
  ['NUL', 'a\u0000b'],
  ['RTL override', '\u202Eexe.txt\u202C'],
  ['RTL/LTR marks', '\u200F\u200Ename'],
  ['emoji and ZWJ', '📁🚀👨‍👩‍👧'],
  ['combining and BOM', 'e\u0301\uFEFF'],
  ['control chars', '\u0001\u001f\u007f'],
];

/** Raw bytes that are not UTF-8 (overlong forms of '.', '/', NUL; a lone continuation; 0xFF). */
const BAD_BYTES: Array<[string, number[]]> = [
  ['overlong ..', [0xc0, 0xae, 0xc0, 0xae]],
  ['overlong /', [0xc0, 0xaf]],
  ['overlong NUL', [0xc0, 0x80]],
  ['3-byte overlong /', [0xe0, 0x80, 0xaf]],
  ['invalid 0xFF', [0xff, 0xfe]],
  ['encoded surrogate (CESU)', [0xed, 0xa0, 0x80]],
];

interface FolderRec {
  folder_id: string;
  name: string;
  storage_id: string;
  path: string;
}

/** Records listed by GET /folders against directories in the pools: both ways. */
async function consistency(d: TestDaemon, token: string, poolDirs: string[]): Promise<string[]> {
  const r = await d.request('GET', `${API}/folders`, { token });
  expect(r.status).to.equal(200);
  const recs = r.body.folders as FolderRec[];
  const problems: string[] = [];
  for (const f of recs) {
    let ok = false;
    try {
      ok = fs.lstatSync(f.path).isDirectory();
    } catch {
      ok = false;
    }
    if (!ok) problems.push(`record ${f.folder_id} '${f.name}' has no directory at ${f.path}`);
  }
  const recorded = new Set(recs.map((f) => f.path));
  for (const dir of poolDirs) {
    for (const name of fs.readdirSync(dir)) {
      if (!recorded.has(path.join(dir, name))) problems.push(`directory ${path.join(dir, name)} has no record`);
    }
  }
  const ids = recs.map((f) => f.folder_id);
  if (new Set(ids).size !== ids.length) problems.push('duplicate folder ids');
  return problems;
}

describe('bad input to every endpoint', function () {
  let d: TestDaemon;
  let tok: string;
  let folderId: string;
  let missing: Set<string>;
  let poolDir: string;
  /** Sample values that reach the real folder code rather than stopping at "no such folder". */
  let real: Record<string, unknown>;

  before(async function () {
    this.timeout(60_000);
    d = await startDaemon();
    tok = await d.token('bad-input', [...ALL_SCOPES]);
    const mk = await d.request('POST', `${API}/folders`, { token: tok, body: { storage_id: 'default', name: 'bi-main' } });
    expect(mk.status).to.equal(201);
    folderId = mk.body.folder.folder_id;
    poolDir = path.dirname(mk.body.folder.path);
    expect((await d.request('POST', `${API}/folders/${folderId}/subfolders`, { token: tok, body: { name: 'inner' } })).status).to.equal(201);
    real = { storage_id: 'default', folder_id: folderId, src_folder_id: folderId, dst_folder_id: folderId, sub_path: 'inner', src_sub_path: 'inner' };
    missing = await unavailableDomains(d.url, tok);
  });

  const send = (method: string, p: string, body?: string | Buffer, chunked = false) => raw(d.url, method, p, { token: tok, body, chunked, timeoutMs: 20_000 });
  const where = (op: Operation, what: string) => `${op.name} (${op.method} ${op.path}) ${what}`;
  const only4xx = (r: RawReply) => (r.status >= 400 && r.status < 500 ? undefined : `not a 4xx: ${show(r)}`);
  /**
   * Valid text in a valid place: a 2xx/4xx, 501 from an operation not built yet, or 503 naming the
   * missing host program of a domain whose runtime this host lacks; never 500/502, never another 503.
   */
  const noServerError = (op: Operation) => (r: RawReply) =>
    r.status < 500 || runtimeMissing(op, r, missing) || absentUpstream(op, r) ? undefined : `server error: ${show(r)}`;
  const realPath = (op: Operation) => concretePath(op, pathValues(op, real));

  it('malformed JSON bodies: 4xx from every endpoint', async () => {
    const p = new Problems();
    const bad = [
      '{',
      '{"a"',
      '{"a":}',
      '{"a":1,}',
      "{'a':1}",
      '{"a":1}}',
      'NaN',
      '{"a":NaN}',
      '{"a":Infinity}',
      '{"a":undefined}',
      '\u0000',
      '{"a":"\u0001"',
      '{"a":01}',
      '//x\n{}',
    ];
    await pool(operations, 8, async (op) => {
      for (const b of bad) p.add(where(op, JSON.stringify(b)), only4xx(await send(op.method, realPath(op), b)));
    });
    p.check(operations.length * bad.length);
  });

  it('2 MiB bodies (with a length and chunked): 413 from every endpoint', async () => {
    const p = new Problems();
    const huge = Buffer.from(JSON.stringify({ name: 'x'.repeat(2 * MIB) }));
    // The local administrator's operations refuse every token (403) before reading a body: test/conformance/walk.test.ts.
    const bodied = operations.filter((o) => !o.admin);
    await pool(bodied, 4, async (op) => {
      p.add(where(op, 'content-length'), (await send(op.method, realPath(op), huge)).status === 413 ? undefined : 'not 413');
      p.add(where(op, 'chunked'), (await send(op.method, realPath(op), huge, true)).status === 413 ? undefined : 'not 413');
    });
    p.check(bodied.length * 2);
  });

  it('deeply nested JSON (100000 levels of [ and of {"a":), closed or not: 4xx from every endpoint', async () => {
    const p = new Problems();
    const n = 100_000;
    const bodies: Array<[string, string]> = [
      ['[ unclosed', '['.repeat(n)],
      ['[ closed', '['.repeat(n) + ']'.repeat(n)],
      ['{"a": unclosed', '{"a":'.repeat(n)],
      ['{"a": closed', '{"a":'.repeat(n) + '1' + '}'.repeat(n)],
    ];
    await pool(operations, 4, async (op) => {
      for (const [what, b] of bodies) p.add(where(op, what), only4xx(await send(op.method, realPath(op), b)));
      // Nested inside a real argument: every string argument given a deep structure.
      if (takesBody(op)) {
        for (const name of Object.keys(op.args).slice(0, 2)) {
          const base = JSON.stringify({ ...minimalArgs(op, real), [name]: '__DEEP__' });
          const deep = base.replace('"__DEEP__"', '{"a":'.repeat(n) + '1' + '}'.repeat(n));
          p.add(where(op, `${name} deep`), only4xx(await send(op.method, realPath(op), deep)));
        }
      }
    });
    p.check(operations.length * 4);
  });

  it('deeply nested JSON text in object-valued query arguments: 4xx', async () => {
    const p = new Problems();
    const q = operations.filter((o) => !takesBody(o) && Object.values(o.args).some((s) => typesOf(s).includes('object')));
    for (const op of q) {
      for (const [name] of Object.entries(op.args).filter(([, s]) => typesOf(s).includes('object'))) {
        for (const text of ['['.repeat(3000) + ']'.repeat(3000), '{"a":'.repeat(1500) + '1' + '}'.repeat(1500), '['.repeat(5000)]) {
          const c = callFor(op, minimalArgs(op, real), real);
          const sep = c.path.includes('?') ? '&' : '?';
          p.add(where(op, `${name} nested`), only4xx(await send(op.method, `${c.path}${sep}${name}=${encodeURIComponent(text)}`)));
        }
      }
    }
    p.check(6);
  });

  it('odd unicode in every string argument (body and query) and path parameter: no server error', async () => {
    const p = new Problems();
    await pool(operations, 8, async (op) => {
      const check = noServerError(op);
      for (const [name, schema] of Object.entries(props(op))) {
        if (primaryType(schema) !== 'string' || 'enum' in schema || schema.format) continue;
        for (const [what, s] of ODD) {
          if (name in op.params) {
            if (isGreedyParam(name)) continue; // sub paths: below, with the path cases
            let url: string;
            try {
              url = concretePath(op, pathValues(op, { ...real, [name]: s }));
            } catch {
              continue; // a lone surrogate has no UTF-8 form for a URL: the raw-bytes test sends its CESU bytes
            }
            p.add(where(op, `path ${name} ${what}`), check(await send(op.method, url, takesBody(op) ? JSON.stringify(minimalArgs(op, real)) : undefined)));
          } else {
            const c = callFor(op, { ...minimalArgs(op, real), [name]: s }, real);
            p.add(where(op, `${name} ${what}`), check(await send(c.method, c.path, c.body)));
          }
        }
      }
    });
    p.check(operations.length * ODD.length);
  });

  it('bytes that are not UTF-8 (overlong forms, 0xFF, CESU surrogates) in bodies, query strings and paths: no server error', async () => {
    const p = new Problems();
    await pool(operations, 8, async (op) => {
      const check = noServerError(op);
      for (const [what, bytes] of BAD_BYTES) {
        const strArgs = Object.entries(op.args).filter(([, s]) => primaryType(s) === 'string' && !('enum' in s));
        if (takesBody(op)) {
          const name = strArgs[0]?.[0] ?? 'peer_id';
          const text = JSON.stringify({ ...minimalArgs(op, real), [name]: '__RAW__' });
          const [a, b] = text.split('__RAW__');
          p.add(where(op, `body ${what}`), check(await send(op.method, realPath(op), Buffer.concat([Buffer.from(a), Buffer.from(bytes), Buffer.from(b)]))));
        } else {
          const c = callFor(op, minimalArgs(op, real), real);
          const sep = c.path.includes('?') ? '&' : '?';
          const enc = bytes.map((x) => '%' + x.toString(16).toUpperCase().padStart(2, '0')).join('');
          const name = op.peerId === 'none' ? 'x' : (strArgs[0]?.[0] ?? 'peer_id');
          p.add(where(op, `query ${what}`), check(await send(op.method, `${c.path}${sep}${name}=${enc}`)));
        }
        // In a path segment, percent-encoded: not UTF-8, so 400.
        const params = Object.keys(op.params);
        if (params.length) {
          const enc = bytes.map((x) => '%' + x.toString(16).toUpperCase().padStart(2, '0')).join('');
          const pv = pathValues(op, real);
          const last = params[params.length - 1];
          const url = concretePath(op, { ...pv, [last]: '__RAW__' }).replace('__RAW__', enc);
          const r = await send(op.method, url, takesBody(op) ? JSON.stringify(minimalArgs(op, real)) : undefined);
          p.add(where(op, `path ${what}`), only4xx(r));
        }
      }
    });
    p.check(operations.length * BAD_BYTES.length);
  });

  it('weird query strings (%zz, repeated keys, __proto__/constructor keys, huge values): 4xx from every endpoint', async () => {
    const p = new Problems();
    const huge = 'v'.repeat(100_000);
    await pool(operations, 8, async (op) => {
      const c = callFor(op, minimalArgs(op, real), real);
      const [base, q0] = c.path.split('?');
      const q = q0 ? `${q0}&` : '';
      const variants = [
        `%zz=1`,
        `a%zzb=1`,
        `peer_id=%zz`,
        `peer_id=a&peer_id=b`,
        `peer_id=${d.nodeId}&peer_id=${d.nodeId}`,
        `__proto__=x`,
        `__proto__[polluted]=1`,
        `constructor=x`,
        `constructor[prototype][polluted]=1`,
        `prototype=1`,
        `hasOwnProperty=1`,
        `toString=x`,
        `zz=${huge}`,
        `${'k'.repeat(20_000)}=1`,
        `=`,
        `&&&=&`,
      ];
      for (const v of variants) p.add(where(op, `?${v.slice(0, 40)}`), only4xx(await send(op.method, `${base}?${q}${v}`, c.body)));
    });
    p.check(operations.length * 16);
    // Nothing got polluted in the daemon: it still validates as before.
    const r = await send('GET', `${API}/folders?polluted=1`);
    expect(r.status).to.equal(400);
  });

  it('weird paths (%2F in sub paths, ../, //, %00, bad percent-encoding): 4xx, never a 5xx', async () => {
    const p = new Problems();
    const strict: Array<[string, string, string?]> = [
      ['GET', `${API}/folders/%00`],
      ['DELETE', `${API}/folders/%00`],
      ['PATCH', `${API}/folders/%00`, JSON.stringify({ new_name: 'x' })],
      ['GET', `${API}/folders/${folderId}/contents/%00`],
      ['GET', `${API}/%zz`],
      ['GET', `${API}/folders/%`],
      ['GET', `${API}/../../etc/passwd`],
      ['GET', `${API}/folders/../../../etc/passwd`],
      ['GET', `${API}/folders/%2e%2e/%2e%2e/etc`],
      ['GET', `/api/v1%2Ffolders`],
      ['GET', `/api/v1/folders%2F${folderId}`],
      ['GET', `/etc/passwd`],
      ['GET', `http://example.com${API}/nope`],
      ['GET', `*`],
    ];
    // Every operation with a sub-path parameter: encoded separators, escapes, NUL.
    for (const op of operations.filter((o) => Object.keys(o.params).some(isGreedyParam))) {
      const body = takesBody(op) ? JSON.stringify({ ...minimalArgs(op, real), dst_sub_path: 'elsewhere' }) : undefined;
      for (const bad of ['inner%2Fx', 'inner%5Cx', '..', '../..', 'inner/../..', '%2e%2e', 'inner/%2e%2e/%2e%2e', '%00', 'inner%00x', '%2F', '..%2F..%2Fetc']) {
        const pv = pathValues(op, real);
        const gp = Object.keys(op.params).find(isGreedyParam)!;
        strict.push([op.method, concretePath(op, { ...pv, [gp]: '__P__' }).replace('__P__', bad), body]);
      }
    }
    for (const [m, u, b] of strict) p.add(`${m} ${u}`, only4xx(await send(m, u, b)));
    // '//' and trailing '/': either refused or the same answer as the collapsed path; never a 5xx.
    const lenient: Array<[string, string]> = [
      ['GET', `${API}//folders`],
      ['GET', `${API}/folders//`],
      ['GET', `/${API}/folders`],
      ['GET', `${API}/folders/${folderId}//contents`],
      ['GET', `${API}/folders/${folderId}/contents/`],
    ];
    for (const [m, u] of lenient) {
      const r = await send(m, u);
      const collapsed = await send(m, u.replace(/\/{2,}/g, '/').replace(/(.)\/$/, '$1'));
      p.add(`${m} ${u}`, r.status < 500 && (r.status >= 400 || r.status === collapsed.status) ? undefined : `${show(r)} (collapsed: ${collapsed.status})`);
    }
    p.check(strict.length + lenient.length);
    // Nothing escaped: the directory above the pool is untouched by any of it.
    expect(fs.existsSync(path.join(poolDir, '..', 'x'))).to.equal(false);
    expect(fs.existsSync(path.join(poolDir, '..', 'elsewhere'))).to.equal(false);
  });

  it('a folder or subfolder name with an unpaired surrogate is refused (it has no UTF-8 form on disk)', async () => {
    for (const name of ['a\ud800b', '\udc00', 'x\udbff']) {
      const r = await send('POST', `${API}/folders`, JSON.stringify({ storage_id: 'default', name }));
      expect(r.status, show(r)).to.equal(400);
      expect(r.body.error).to.contain("'name'");
      const s = await send('POST', `${API}/folders/${folderId}/subfolders`, JSON.stringify({ name }));
      expect(s.status, show(s)).to.equal(400);
      const c = await send('GET', `${API}/folders/${folderId}/contents?sub_path=${encodeURIComponent('inner')}%ED%A0%80`);
      expect(c.status, show(c)).to.be.within(400, 499);
    }
  });

  it('afterwards the daemon is alive, healthy, and every folder record matches a directory and vice versa', async () => {
    expect(d.proc.exitCode).to.equal(null);
    expect(d.proc.signalCode).to.equal(null);
    const h = await d.request('GET', `${API}/system/health`, { token: tok });
    expect(h.status).to.equal(200);
    expect(await consistency(d, tok, [poolDir])).to.deep.equal([]);
    const errors = d.logs.filter((l) => l.level >= 50);
    expect(errors.map((l) => l.msg + ' ' + (l.err?.message ?? ''))).to.deep.equal([]);
  });

  describe('SIGKILL in the middle of a burst of folder creates', () => {
    it('restarts on the same data dir with records and directories in agreement (5 rounds)', async function () {
      this.timeout(90_000);
      const dir = tempDir('hostd-crash-');
      let k = await startDaemon({ dataDir: dir });
      let t = await k.token('crash', ['files.read', 'files.manage']);
      const poolDirs = [path.join(dir, 'pools', 'default')];
      let done = 0;
      for (let round = 0; round < 5; round++) {
        const names = Array.from({ length: 80 }, (_, i) => `burst-${round}-${String(i).padStart(2, '0')}`);
        let answered = 0;
        const killAt = 15 + round * 10;
        let killed: Promise<void> | undefined;
        const results = await Promise.allSettled(
          names.map(async (name, i) => {
            // A few renames and deletes of earlier folders mixed in.
            const r = await raw(k.url, 'POST', `${API}/folders`, { token: t, body: JSON.stringify({ storage_id: 'default', name }), timeoutMs: 20_000 });
            if (++answered >= killAt && !killed) killed = k.kill();
            if (r.status === 201 && i % 7 === 0) {
              await raw(k.url, 'PATCH', `${API}/folders/${r.body.folder.folder_id}`, { token: t, body: JSON.stringify({ new_name: `${name}-r` }) });
            } else if (r.status === 201 && i % 11 === 0) {
              await raw(k.url, 'DELETE', `${API}/folders/${r.body.folder.folder_id}`, { token: t });
            }
            return r.status;
          }),
        );
        await killed;
        expect(k.proc.signalCode).to.equal('SIGKILL');
        done += results.filter((x) => x.status === 'fulfilled' && x.value === 201).length;
        k = await startDaemon({ dataDir: dir });
        t = await k.token(`crash-${round}`, ['files.read', 'files.manage']);
        const problems = await consistency(k, t, poolDirs);
        expect(problems, `round ${round}: ${problems.join('; ')}`).to.deep.equal([]);
        // The store answers and new folders can be made next to what survived.
        const mk = await k.request('POST', `${API}/folders`, { token: t, body: { storage_id: 'default', name: `after-${round}` } });
        expect(mk.status).to.equal(201);
      }
      expect(done, 'some creates completed before the kills').to.be.greaterThan(10);
    });
  });
});
