/**
 * The conformance walk: every operation of the registry, against one real
 * daemon, through every rule of the spec's Errors and Authentication
 * sections. Each test walks all operations, collects what does not conform
 * and fails with the whole list. Every success answer a test gets is checked
 * against its operation's result schema, where the registry gives one.
 */
import { expect } from 'chai';
import type { JsonSchema, Operation } from '../../api/registry/types.js';
import { ALL_SCOPES, operations } from '../../api/registry/index.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import {
  API,
  METHODS,
  ONE_MIB,
  Problems,
  allowAt,
  callFor,
  concretePath,
  errorProblem,
  minimalArgs,
  nonNull,
  pathValues,
  pool,
  primaryType,
  props,
  queryString,
  queryText,
  raw,
  registryMethodsAt,
  resultMismatch,
  sampleValue,
  show,
  takesBody,
  typesOf,
  unrelatedScope,
  runtimeMissing,
  unavailableDomains,
  wrongValue,
  type CallSpec,
  type RawReply,
  absentUpstream,
} from '../helpers/conformance.js';

/**
 * The operations of the local administrator only (token management) answer
 * 403 to every bearer token before anything else: the walk's token-based
 * rules cover the others, and a test below pins that refusal; their argument
 * checks run over the admin socket in test/integration/console/tokens-api.test.ts.
 */
const walked = operations.filter((o) => !o.admin);

describe('conformance walk over every registry operation', function () {
  let d: TestDaemon;
  let all: string;
  const byScope = new Map<string, string>();
  let cataloged: Set<string>;
  let selfId: string;

  /** `token` null: no Authorization header (undefined means the all-scopes token). */
  const send = (c: CallSpec, token: string | null = all, headers?: Record<string, string>): Promise<RawReply> =>
    raw(d.url, c.method, c.path, { token: token ?? undefined, body: c.body, headers });
  const valid = (op: Operation) => callFor(op, minimalArgs(op));
  const where = (op: Operation, what = '') => `${op.name} (${op.method} ${op.path})${what ? ' ' + what : ''}`;
  /** Adds to `p` whether a success answer fits the operation's result schema (nothing for other answers). */
  const checkResult = (p: Problems, op: Operation, r: RawReply, what = 'result'): RawReply => {
    if (op.result && r.status >= 200 && r.status < 300) p.add(where(op, what), resultMismatch(op, r));
    return r;
  };

  before(async function () {
    this.timeout(60_000);
    d = await startDaemon();
    all = await d.token('conf-all', [...ALL_SCOPES]);
    for (const s of ALL_SCOPES) byScope.set(s, await d.token(`conf-${s}`, [s]));
    const cat = await d.request('GET', `${API}/catalog`, { token: all });
    expect(cat.status).to.equal(200);
    cataloged = new Set(cat.body.endpoints.map((e: { operation: string }) => e.operation));
    const peers = await d.request('GET', `${API}/peers`, { token: all });
    selfId = peers.body.peers.find((p: { is_self: boolean }) => p.is_self).peer_id;
  });

  it('walks every operation of the registry (test/unit/registry.test.ts pins their number)', () => {
    expect(cataloged.size).to.equal(operations.length);
    expect(operations.filter((o) => !cataloged.has(o.name)).map((o) => o.name)).to.deep.equal([]);
  });

  describe('authentication and scopes', () => {
    it('401 without an Authorization header, with an unknown token, a malformed header or an altered secret', async () => {
      const p = new Problems();
      const altered = all.slice(0, -1) + (all.endsWith('A') ? 'B' : 'A');
      const variants: Array<[string, Record<string, string> | undefined]> = [
        ['no header', undefined],
        ['unknown token', { authorization: 'Bearer hostd_doesnotexist0000000000000000000000000' }],
        ['altered secret', { authorization: `Bearer ${altered}` }],
        ['Basic scheme', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }],
        ['empty bearer', { authorization: 'Bearer ' }],
        ['secret without scheme', { authorization: all }],
      ];
      await pool(walked, 8, async (op) => {
        for (const [what, headers] of variants) p.add(where(op, what), errorProblem(await send(valid(op), null, headers), 401));
      });
      p.check(walked.length * variants.length);
    });

    it('403 naming the scope for a token with an unrelated scope (operations that need one)', async () => {
      const p = new Problems();
      await pool(
        walked.filter((o) => o.scopes.length),
        8,
        async (op) => {
          const s = unrelatedScope(op);
          p.add(where(op, `with only ${s}`), errorProblem(await send(valid(op), byScope.get(s)), 403, ...op.scopes.map((x) => `'${x}'`)));
        },
      );
      p.check(128);
    });

    it('403 naming the missing one for a token holding one of two required scopes', async () => {
      const p = new Problems();
      const two = walked.filter((o) => o.scopes.length === 2);
      expect(two.map((o) => o.name).sort()).to.deep.equal(['templates_create', 'templates_get']);
      for (const op of two) {
        for (const held of op.scopes) {
          const missing = op.scopes.filter((s) => s !== held);
          const r = await send(valid(op), byScope.get(held));
          p.add(where(op, `with only ${held}`), errorProblem(r, 403, ...missing.map((m) => `'${m}'`)));
          if (r.body?.error?.includes(`'${held}'`)) p.add(where(op), `message names the held scope: ${r.body.error}`);
        }
      }
      p.check(4);
    });

    it('operations of the local administrator only answer 403 to every token, even one holding every scope, before checking anything else', async () => {
      const p = new Problems();
      const admins = operations.filter((o) => o.admin);
      expect(admins.map((o) => o.name).sort()).to.deep.equal(['tokens_create', 'tokens_list', 'tokens_revoke']);
      for (const op of admins) {
        for (const c of [valid(op), { ...valid(op), body: '[]' }]) p.add(where(op), errorProblem(await send(c), 403, 'local administrator'));
      }
      p.check(admins.length * 2);
    });

    it('operations with no scopes (the catalog, whoami) take any valid token, even one without scopes', async () => {
      const none = await d.token('conf-noscopes', []);
      // The event operations name no scope either, but answer only a token with some read scope (docs/events.md).
      const readers = ['events_list', 'events_stream'];
      const open = walked.filter((o) => o.scopes.length === 0 && !readers.includes(o.name));
      expect(open.map((o) => o.name).sort()).to.deep.equal(['catalog_get', 'tokens_whoami']);
      const answers = new Problems();
      for (const op of open) {
        for (const t of [none, ...byScope.values()]) expect(checkResult(answers, op, await send(valid(op), t)).status, op.name).to.equal(200);
      }
      answers.check(1 + byScope.size);
      // ...and a token without scopes gets 403 everywhere else.
      const p = new Problems();
      await pool(
        walked.filter((o) => o.scopes.length || readers.includes(o.name)),
        8,
        async (op) => p.add(where(op), errorProblem(await send(valid(op), none), 403)),
      );
      p.check(130);
    });
  });

  describe('arguments', () => {
    it('400 for a body that is not a JSON object (body methods); 400 for any body on GET/DELETE', async () => {
      const p = new Problems();
      const bad = ['[]', '[{"a":1}]', '"text"', '42', 'null', 'true', '{"a":', 'not json', '{"a":1}{', "{'a':1}"];
      await pool(walked, 8, async (op) => {
        const path = concretePath(op);
        for (const body of bad) p.add(where(op, `body ${body}`), errorProblem(await send({ method: op.method, path, body }), 400));
        if (!takesBody(op)) p.add(where(op, 'with a JSON object body'), errorProblem(await send({ method: op.method, path, body: '{}' }), 400));
      });
      p.check(walked.length * 10);
    });

    it('400 naming an unknown argument (in the body, in the query string)', async () => {
      const p = new Problems();
      await pool(walked, 8, async (op) => {
        p.add(where(op), errorProblem(await send(callFor(op, { ...minimalArgs(op), zz_unknown: 'v' })), 400, "'zz_unknown'"));
        if (takesBody(op)) {
          const c = valid(op);
          p.add(where(op, 'in the query'), errorProblem(await send({ ...c, path: c.path + '?zz_unknown=v' }), 400, "'zz_unknown'"));
        }
      });
      p.check(walked.length);
    });

    it('400 naming each missing required argument', async () => {
      const p = new Problems();
      const withRequired = walked.filter((o) => (o.required ?? []).length);
      expect(withRequired.length).to.be.greaterThan(30);
      await pool(withRequired, 8, async (op) => {
        for (const name of op.required ?? []) {
          const args = minimalArgs(op);
          delete args[name];
          p.add(where(op, `without ${name}`), errorProblem(await send(callFor(op, args)), 400, `'${name}'`));
        }
      });
      p.check(withRequired.length);
    });

    it('400 naming an argument of the wrong type, for every argument that can carry one', async () => {
      const p = new Problems();
      let skipped = 0;
      await pool(walked, 8, async (op) => {
        for (const [name, schema] of Object.entries(props(op))) {
          const w = wrongValue(schema);
          if (name in op.params) {
            // Path segments are text: only integer parameters can be of the wrong type.
            if (primaryType(schema) !== 'integer') continue;
            const c = callFor(op, minimalArgs(op), { [name]: 'abc' });
            p.add(where(op, `path ${name}='abc'`), errorProblem(await send(c), 400, `'${name}'`));
          } else if (takesBody(op)) {
            p.add(where(op, `${name}: ${w.what}`), errorProblem(await send(callFor(op, { ...minimalArgs(op), [name]: w.json })), 400, `'${name}'`));
          } else if (w.text !== undefined) {
            const c = callFor(op, minimalArgs(op));
            const q = new URLSearchParams(c.path.split('?')[1] ?? '');
            q.set(name, w.text);
            p.add(where(op, `?${name}=${w.text}`), errorProblem(await send({ ...c, path: `${c.path.split('?')[0]}?${q}` }), 400, `'${name}'`));
          } else skipped++;
        }
      });
      // Every operation with a body has peer_id or another argument to get wrong.
      p.check(250);
      const stringQueryArgs = operations
        .filter((o) => !takesBody(o))
        .flatMap((o) => Object.entries(props(o)).filter(([n, s]) => !(n in o.params) && wrongValue(s).text === undefined));
      expect(skipped, 'only string arguments of GET/DELETE are skipped (a query string cannot mistype them)').to.equal(stringQueryArgs.length);
    });

    it('400 naming an argument below its minimum, above its maximum or over its maxLength', async () => {
      const p = new Problems();
      await pool(walked, 8, async (op) => {
        for (const [name, schemaIn] of Object.entries(props(op))) {
          const schema = nonNull(schemaIn);
          const bad: unknown[] = [];
          if (typeof schema.minimum === 'number') bad.push(schema.minimum - 1);
          if (typeof schema.maximum === 'number') bad.push(schema.maximum + 1);
          if (typeof schema.maxLength === 'number') bad.push('n'.repeat(schema.maxLength + 1));
          for (const v of bad) {
            const c = name in op.params ? callFor(op, minimalArgs(op), { [name]: v }) : callFor(op, { ...minimalArgs(op), [name]: v });
            p.add(where(op, `${name}=${String(v).slice(0, 20)}`), errorProblem(await send(c), 400, `'${name}'`));
          }
        }
      });
      p.check(60);
    });

    it('GET/DELETE arguments in the query string work as in a body: integers, booleans, null, JSON text for objects', async () => {
      const p = new Problems();
      let checked = 0;
      const queryOps = walked.filter((o) => !takesBody(o) && Object.keys(o.args).length);
      // A cursor is only valid when this server issued it: take one from a real page.
      const page = await send({ method: 'GET', path: `${API}/activity?limit=1` });
      expect(page.body.next_cursor, 'a next_cursor (token creation wrote rows)').to.be.a('string');
      const events = await send({ method: 'GET', path: `${API}/events?limit=1` });
      expect(events.body.next_cursor, 'an event cursor').to.be.a('string');
      const sampleFor = (op: Operation, name: string, schema: JsonSchema) =>
        name === 'cursor' ? (op.domain === 'events' ? events.body.next_cursor : page.body.next_cursor) : sampleValue(schema);
      await pool(queryOps, 4, async (op) => {
        const baseline = checkResult(p, op, await send(valid(op)));
        p.add(where(op, 'baseline'), baseline.status === 400 ? `valid arguments give ${show(baseline)}` : undefined);
        const everything: Record<string, unknown> = { ...minimalArgs(op) };
        for (const [name, schema] of Object.entries(op.args)) {
          const v = sampleFor(op, name, schema);
          everything[name] = v;
          const r = checkResult(p, op, await send(callFor(op, { ...minimalArgs(op), [name]: v })));
          checked++;
          p.add(where(op, `?${name}=${queryText(v)}`), r.status === baseline.status ? undefined : `got ${show(r)}, without it ${baseline.status}`);
          if (typesOf(schema).includes('null') && !(op.required ?? []).includes(name)) {
            const rn = await send(callFor(op, { ...minimalArgs(op), [name]: null }));
            p.add(where(op, `?${name}=null`), rn.status === baseline.status ? undefined : `got ${show(rn)}, without it ${baseline.status}`);
          }
          if (primaryType(nonNull(schema)) === 'object') {
            const c = callFor(op, minimalArgs(op));
            const sep = c.path.includes('?') ? '&' : '?';
            p.add(
              where(op, `?${name}={bad json`),
              errorProblem(await send({ ...c, path: `${c.path}${sep}${name}=${encodeURIComponent('{bad')}` }), 400, `'${name}'`),
            );
          }
        }
        const r = checkResult(p, op, await send(callFor(op, everything)));
        p.add(
          where(op, `all arguments ${queryString(everything)}`),
          r.status === baseline.status ? undefined : `got ${show(r)}, without them ${baseline.status}`,
        );
      });
      p.check(queryOps.length);
      expect(checked).to.be.greaterThan(20);
      // Object-valued arguments were among them.
      const objectArgs = queryOps.flatMap((o) =>
        Object.entries(o.args)
          .filter(([, s]) => primaryType(nonNull(s)) === 'object')
          .map(([n]) => n),
      );
      expect(objectArgs).to.include.members(['target', 'labels']);
    });

    it('a valid call with the same arguments in the body and the query string is 400 (each argument in one place)', async () => {
      const op = walked.find((o) => o.name === 'folders_create')!;
      const r = await send({
        method: 'POST',
        path: `${concretePath(op)}?peer_id=${selfId}`,
        body: JSON.stringify({ storage_id: 'x', name: 'y', peer_id: selfId }),
      });
      expect(errorProblem(r, 400, "'peer_id'")).to.equal(undefined);
      const dup = await send({ method: 'GET', path: `${API}/activity?limit=1&limit=2` });
      expect(errorProblem(dup, 400, "'limit'")).to.equal(undefined);
    });
  });

  describe('routing', () => {
    it("405 with an Allow header listing exactly the methods of the path (the registry's, HEAD where GET is, OPTIONS)", async () => {
      const p = new Problems();
      const paths = [...new Set(walked.map((o) => concretePath(o)))];
      await pool(paths, 8, async (path) => {
        const allowed = registryMethodsAt(path);
        const header = allowAt(path);
        for (const m of METHODS.filter((x) => !allowed.includes(x))) {
          const r = await send({ method: m, path, body: m === 'GET' || m === 'DELETE' ? undefined : '{}' });
          const prob = errorProblem(r, 405, ...allowed);
          const allow = String(r.headers.allow ?? '')
            .split(',')
            .map((s) => s.trim())
            .filter(Boolean)
            .sort();
          p.add(
            `${m} ${path}`,
            prob ?? (JSON.stringify(allow) === JSON.stringify(header) ? undefined : `Allow: ${r.headers.allow}; expected: ${header.join(', ')}`),
          );
        }
      });
      p.check(250);
    });

    it('OPTIONS answers 204 with that Allow header on every path, without a token; HEAD answers like GET without a body', async () => {
      const p = new Problems();
      const paths = [...new Set(walked.map((o) => concretePath(o)))];
      await pool(paths, 8, async (path) => {
        const o = await send({ method: 'OPTIONS', path }, null);
        const allow = String(o.headers.allow ?? '')
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
          .sort();
        p.add(
          `OPTIONS ${path}`,
          o.status === 204 && o.text === '' && JSON.stringify(allow) === JSON.stringify(allowAt(path)) ? undefined : `${show(o)} Allow: ${o.headers.allow}`,
        );
      });
      const gets = walked.filter((op) => op.method === 'GET');
      await pool(gets, 8, async (op) => {
        const c = valid(op);
        const get = checkResult(p, op, await send(c));
        const head = await send({ ...c, method: 'HEAD' });
        const same = head.status === get.status && head.text === '' && head.headers['content-type'] === get.headers['content-type'];
        // Lists may change between the two calls (tasks, activity): the length is compared only for fixed answers.
        const sized = get.status >= 400 || op.name === 'catalog_get' ? head.headers['content-length'] === String(Buffer.byteLength(get.text)) : true;
        p.add(
          `HEAD ${c.path}`,
          same && sized ? undefined : `HEAD ${head.status} ${head.headers['content-length']} '${head.text.slice(0, 50)}'; GET ${show(get)}`,
        );
      });
      p.check(paths.length + gets.length);
    });

    it('405 without a token as well (routing comes first)', async () => {
      const r = await send({ method: 'PUT', path: `${API}/folders` }, null);
      expect(errorProblem(r, 405)).to.equal(undefined);
      expect(r.headers.allow).to.equal('GET, HEAD, POST, OPTIONS');
    });

    it('404 for unknown paths under /api/v1 (derived: every operation path with a segment appended, and unknown collections)', async () => {
      const p = new Problems();
      const extra = walked.map((o) => `${concretePath(o)}/zz-nope`).filter((x) => registryMethodsAt(x).length === 0);
      const heads = [...new Set(walked.map((o) => o.segments[0]))];
      const unknown = [
        `${API}`,
        `${API}/`,
        `${API}/zz-nope`,
        `${API}/zz-nope/1`,
        '/api/v2/folders',
        '/api/folders',
        ...heads.map((h) => `${API}/${h}-zz`),
        ...extra,
      ];
      expect(extra.length).to.be.greaterThan(90);
      await pool(unknown, 8, async (path) => {
        for (const token of [all, null]) {
          p.add(`GET ${path}${token ? '' : ' (no token)'}`, errorProblem(await send({ method: 'GET', path }, token), 404));
        }
        p.add(`POST ${path}`, errorProblem(await send({ method: 'POST', path, body: '{}' }), 404));
      });
      p.check(unknown.length * 3);
    });

    it('413 for a body over 1 MiB, on every operation (with a length, and chunked); exactly 1 MiB is not 413', async () => {
      const p = new Problems();
      const big = Buffer.alloc(ONE_MIB + 1, 0x20);
      big[0] = 0x7b; // '{' ... not even parsed
      await pool(walked, 4, async (op) => {
        const path = concretePath(op);
        p.add(where(op, 'content-length'), errorProblem(await raw(d.url, op.method, path, { token: all, body: big }), 413));
        if (takesBody(op)) {
          p.add(where(op, 'chunked'), errorProblem(await raw(d.url, op.method, path, { token: all, body: big, chunked: true }), 413));
          // Exactly the limit: read and parsed (then refused for what it says, not for its size).
          const base = { ...minimalArgs(op), zz_pad: '' };
          const exact = JSON.stringify({ ...base, zz_pad: 'p'.repeat(ONE_MIB - Buffer.byteLength(JSON.stringify(base))) });
          expect(Buffer.byteLength(exact)).to.equal(ONE_MIB);
          p.add(where(op, 'exactly 1 MiB'), errorProblem(await raw(d.url, op.method, path, { token: all, body: exact }), 400, "'zz_pad'"));
        }
      });
      p.check(walked.length);
      // The daemon is fine afterwards.
      expect((await send({ method: 'GET', path: `${API}/system/health` })).status).to.equal(200);
    });
  });

  describe('every operation', () => {
    it('never answers 501 nor 5xx to a valid call', async () => {
      const p = new Problems();
      const done = operations;
      expect(done.map((o) => o.name)).to.include.members([
        'catalog_get',
        'folders_list',
        'folders_create',
        'tasks_get',
        'activity_list',
        'peers_list',
        'system_health',
      ]);
      // A domain whose host program is missing here answers 503 naming it; anything else is a defect.
      const missing = await unavailableDomains(d.url, all);
      await pool(done, 4, async (op) => {
        const r = checkResult(p, op, await send(valid(op)));
        p.add(where(op), r.status >= 500 && !runtimeMissing(op, r, missing) && !absentUpstream(op, r) ? `answered ${show(r)}` : undefined);
      });
      p.check(done.length);
    });

    it("every success answer to a valid call fits its operation's result schema (operations that have one)", async () => {
      const withResult = walked.filter((o) => o.result);
      expect(
        withResult.map((o) => o.name),
        'the catalog has its result schema',
      ).to.include('catalog_get');
      const p = new Problems();
      let successes = 0;
      await pool(withResult, 4, async (op) => {
        const r = await send(valid(op));
        if (r.status >= 200 && r.status < 300) successes++;
        checkResult(p, op, r);
      });
      p.check(1);
      expect(successes, 'valid calls that succeeded (their answers were checked)').to.be.at.least(1);
    });
  });

  describe('peer_id', () => {
    it('every schema but peers_list and proxy_move accepts an optional string peer_id; peers_list takes no arguments', async () => {
      const cat = await d.request('GET', `${API}/catalog`, { token: all });
      const p = new Problems();
      for (const e of cat.body.endpoints as Array<{ operation: string; arguments: any }>) {
        const pid = e.arguments.properties?.peer_id;
        if (e.operation === 'peers_list') p.add(e.operation, Object.keys(e.arguments.properties ?? {}).length ? 'has arguments' : undefined);
        else if (operations.find((o) => o.name === e.operation)?.admin)
          p.add(e.operation, pid === undefined ? undefined : 'an administrator-only operation takes no peer_id');
        else if (e.operation === 'proxy_move') p.add(e.operation, pid?.type === 'string' ? undefined : 'proxy_move has no peer_id of its own');
        else p.add(e.operation, pid?.type === 'string' && !(e.arguments.required ?? []).includes('peer_id') ? undefined : `peer_id: ${JSON.stringify(pid)}`);
      }
      p.check(operations.length);
    });

    it('GET /peers lists this node alone with is_self, and rejects any argument', async () => {
      const r = await send({ method: 'GET', path: `${API}/peers` });
      expect(r.status).to.equal(200);
      expect(r.body.peers).to.have.length(1);
      expect(r.body.peers[0]).to.include({ peer_id: d.nodeId, is_self: true });
      expect(errorProblem(await send({ method: 'GET', path: `${API}/peers?peer_id=${selfId}` }), 400, "'peer_id'")).to.equal(undefined);
      expect(errorProblem(await send({ method: 'GET', path: `${API}/peers?x=1` }), 400, "'x'")).to.equal(undefined);
    });

    it('peer_id naming this node runs locally: the same answer as without it', async () => {
      const folders = await send({ method: 'GET', path: `${API}/folders?peer_id=${encodeURIComponent(selfId)}` });
      expect(folders.status).to.equal(200);
      expect(folders.body).to.have.property('folders');
      const p = new Problems();
      await pool(
        walked.filter((o) => o.peerId === 'forward'),
        4,
        async (op) => {
          const without = checkResult(p, op, await send(valid(op)));
          const withSelf = checkResult(p, op, await send(callFor(op, { ...minimalArgs(op), peer_id: selfId })), 'result with peer_id=self');
          p.add(where(op), withSelf.status === without.status ? undefined : `with peer_id=self ${show(withSelf)}; without ${show(without)}`);
        },
      );
      p.check(127);
    });

    it('any other peer_id gives 404 naming the peer (in the body or the query string)', async () => {
      const p = new Problems();
      await pool(
        walked.filter((o) => o.peerId === 'forward'),
        8,
        async (op) => {
          p.add(where(op), errorProblem(await send(callFor(op, { ...minimalArgs(op), peer_id: 'node_elsewhere' })), 404, 'node_elsewhere'));
          if (takesBody(op)) {
            const c = valid(op);
            p.add(where(op, 'query'), errorProblem(await send({ ...c, path: `${c.path}?peer_id=node_elsewhere` }), 404, 'node_elsewhere'));
          }
        },
      );
      p.check(127);
      // proxy_move's peer_id names the member to become the holder: an unknown
      // one is the missing resource (404), said as such rather than as a route.
      const move = walked.find((o) => o.name === 'proxy_move')!;
      const r = await send(callFor(move, { peer_id: 'node_elsewhere' }));
      expect(r.status).to.equal(404);
      expect(r.body).to.deep.equal({ error: "no cluster member 'node_elsewhere'" });
    });
  });

  it('every path parameter is filled from the path, never the body or query', async () => {
    const p = new Problems();
    await pool(
      walked.filter((o) => Object.keys(o.params).length),
      8,
      async (op) => {
        const [name] = Object.keys(op.params);
        const value = pathValues(op)[name];
        const args = { ...minimalArgs(op), [name]: primaryType(op.params[name]) === 'integer' ? Number(value) : value };
        p.add(where(op, name), errorProblem(await send(callFor(op, args)), 400, `'${name}'`));
      },
    );
    p.check(60);
  });
});
