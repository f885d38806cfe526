/**
 * A client generated from GET /api/v1/openapi.json by openapi-typescript
 * (types) and driven by openapi-fetch (its runtime, which percent-encodes
 * every path parameter, `/` included), calling every operation the build
 * serves. The same calls are written out as a typed program against the
 * generated types and type-checked, so a document whose names or shapes
 * disagree with what the server takes fails here twice: at compile time and
 * on the wire.
 *
 * Built operations come from the catalog (`implemented`), so a domain that
 * lands is called too: through a scenario below when it has one, otherwise
 * with sample arguments from its schema, where the request log must show the
 * call routed to that very operation.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import createClient from 'openapi-fetch';
import { ALL_SCOPES, operations } from '../../api/registry/index.js';
import type { Operation } from '../../api/registry/types.js';
import { ROOT, eventually, runCommand, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { API, minimalArgs, pathValues, primaryType, takesBody } from '../helpers/conformance.js';

type Doc = Record<string, any>;

interface Call {
  operationId: string;
  path?: Record<string, string | number>;
  query?: Record<string, unknown>;
  body?: Record<string, unknown>;
}

interface Done extends Call {
  key: string;
  method: string;
  status: number;
  data: any;
  requestId: string;
}

const GEN = path.join(ROOT, 'node_modules/openapi-typescript/bin/cli.js');

describe('a client generated from the OpenAPI document', function () {
  let d: TestDaemon;
  let token: string;
  let doc: Doc;
  let dir: string;
  let poolDir: string;
  let built: string[];
  const byId = new Map<string, { key: string; method: string; op: Doc }>();
  const done: Done[] = [];
  let client: ReturnType<typeof createClient>;
  let seq = 0;

  before(async function () {
    this.timeout(120_000);
    poolDir = tempDir('hostd-genclient-pool-');
    d = await startDaemon({ configYaml: `storage_pools:\n  - id: p\n    path: ${JSON.stringify(poolDir)}\n` });
    token = await d.token('generated-client', [...ALL_SCOPES]);
    const r = await d.request('GET', `${API}/openapi.json`);
    expect(r.status).to.equal(200);
    doc = r.body;
    for (const [key, item] of Object.entries<Doc>(doc.paths)) {
      for (const [method, op] of Object.entries<Doc>(item)) byId.set(op.operationId, { key, method: method.toUpperCase(), op });
    }
    built = operations.map((o) => o.name);
    // Under the repository so that the typed program resolves openapi-fetch from node_modules.
    fs.mkdirSync(path.join(ROOT, 'dist'), { recursive: true });
    dir = fs.mkdtempSync(path.join(ROOT, 'dist', 'generated-client-'));
    fs.writeFileSync(path.join(dir, 'openapi.json'), JSON.stringify(doc));
    client = createClient({ baseUrl: d.url, headers: { authorization: `Bearer ${token}` } });
  });

  after(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  /** One call through openapi-fetch, by operationId, as a generated client makes it. */
  async function call(c: Call): Promise<Done> {
    const found = byId.get(c.operationId);
    if (!found) throw new Error(`no operation ${c.operationId} in the document`);
    const requestId = `genclient-${++seq}`;
    const init: Record<string, unknown> = { params: { path: c.path, query: c.query }, headers: { 'x-request-id': requestId } };
    if (c.body !== undefined) init.body = c.body;
    // An operation answering text (the metrics exposition), as its document says: read as text.
    const ok = Object.entries<any>(found.op.responses ?? {}).find(([code]) => code.startsWith('2'))?.[1];
    const json = !ok?.content || 'application/json' in ok.content;
    if (!json) init.parseAs = 'text';
    const res = await (client as any).request(found.method.toLowerCase(), found.key, init);
    const out: Done = { ...c, key: found.key, method: found.method, status: res.response.status, data: res.data ?? res.error, requestId };
    done.push(out);
    return out;
  }

  /** The request log line of a call. */
  const logOf = (requestId: string) => eventually(() => d.logs.find((l) => l.req_id === requestId), 5000, `log line ${requestId}`);

  it('openapi-typescript generates its types from the document', async function () {
    this.timeout(120_000);
    const r = await runCommand(process.execPath, [GEN, path.join(dir, 'openapi.json'), '-o', path.join(dir, 'schema.d.ts')], { timeoutMs: 120_000 });
    expect(r.code, r.stderr).to.equal(0);
    const types = fs.readFileSync(path.join(dir, 'schema.d.ts'), 'utf8');
    for (const op of operations) expect(types, op.name).to.contain(`    ${op.name}: {`);
  });

  it('reaches every built operation of folders, system, activity, tasks, peers and proxy, nested paths included', async function () {
    this.timeout(120_000);
    const health = await call({ operationId: 'system_health' });
    expect(health.status).to.equal(200);
    expect((await call({ operationId: 'system_allocation' })).status).to.equal(200);
    expect((await call({ operationId: 'catalog_get' })).data.count).to.equal(operations.length);
    const peers = await call({ operationId: 'peers_list' });
    expect(peers.status).to.equal(200);
    const self = peers.data.peers.find((p: { is_self: boolean }) => p.is_self).peer_id as string;

    const created = await call({ operationId: 'folders_create', body: { storage_id: 'p', name: 'gen' } });
    expect(created.status, JSON.stringify(created.data)).to.equal(201);
    const folderId = created.data.folder.folder_id as string;
    expect((await call({ operationId: 'folders_list' })).data.folders.map((f: { folder_id: string }) => f.folder_id)).to.include(folderId);
    expect((await call({ operationId: 'folders_update', path: { folder_id: folderId }, body: { new_name: 'generated' } })).status).to.equal(200);
    const root = path.join(poolDir, 'generated');
    expect(fs.statSync(root).isDirectory()).to.equal(true);

    expect((await call({ operationId: 'folders_subfolders_create', path: { folder_id: folderId }, body: { name: 'dir' } })).status).to.equal(201);
    expect(
      (await call({ operationId: 'folders_subfolders_batch_create', path: { folder_id: folderId }, body: { names: ['d1', 'd2'], sub_path: 'dir' } })).status,
    ).to.equal(201);
    for (const f of ['a.txt', 'b.txt', 'c.txt', 'gone.txt']) fs.writeFileSync(path.join(root, 'dir', f), f);

    const listed = await call({ operationId: 'folders_contents_list', path: { folder_id: folderId }, query: { sub_path: 'dir' } });
    expect(listed.status).to.equal(200);
    expect(JSON.stringify(listed.data)).to.contain('a.txt');
    // An object-valued query argument travels as JSON text (the document's `content: application/json`).
    const byTarget = await call({
      operationId: 'folders_contents_list',
      path: { folder_id: folderId },
      query: { target: JSON.stringify({ kind: 'folder', id: folderId, path: 'dir/d1' }) },
    });
    expect(byTarget.status, JSON.stringify(byTarget.data)).to.equal(200);
    expect((await call({ operationId: 'folders_search', path: { folder_id: folderId }, query: { pattern: 'b.txt' } })).status).to.equal(200);

    // Nested paths: openapi-fetch sends `dir%2Fa.txt`. The move's parameter is `sub_path` in the
    // document (the path item it shares with delete) and fills `src_sub_path`.
    const moved = await call({
      operationId: 'folders_entries_move',
      path: { folder_id: folderId, sub_path: 'dir/a.txt' },
      body: { dst_sub_path: 'dir/d1/a.txt' },
    });
    expect(moved.status, JSON.stringify(moved.data)).to.equal(200);
    expect(fs.readFileSync(path.join(root, 'dir', 'd1', 'a.txt'), 'utf8')).to.equal('a.txt');
    const copied = await call({
      operationId: 'folders_entries_copy',
      path: { src_folder_id: folderId, src_sub_path: 'dir/b.txt' },
      body: { dst_folder_id: folderId, dst_sub_path: 'dir/d2/b.txt' },
    });
    expect(copied.status, JSON.stringify(copied.data)).to.equal(200);
    await eventually(() => fs.existsSync(path.join(root, 'dir', 'd2', 'b.txt')), 10_000, 'the copy');
    const batch = await call({
      operationId: 'folders_entries_batch_move',
      path: { folder_id: folderId },
      body: { moves: [{ src_sub_path: 'dir/c.txt', dst_sub_path: 'c.txt' }] },
    });
    expect(batch.status, JSON.stringify(batch.data)).to.equal(200);
    expect(fs.existsSync(path.join(root, 'c.txt'))).to.equal(true);
    const deleted = await call({ operationId: 'folders_entries_delete', path: { folder_id: folderId, sub_path: 'dir/gone.txt' } });
    expect(deleted.status, JSON.stringify(deleted.data)).to.equal(200);
    expect(fs.existsSync(path.join(root, 'dir', 'gone.txt'))).to.equal(false);
    // Confinement holds for what a generated client sends, too.
    const escaped = await call({ operationId: 'folders_entries_delete', path: { folder_id: folderId, sub_path: '../generated' } });
    expect(escaped.status).to.equal(400);
    expect(fs.existsSync(root)).to.equal(true);

    const act = await call({ operationId: 'activity_list', query: { limit: 50 } });
    expect(act.status).to.equal(200);
    expect(act.data.events.map((i: { metadata: { operation: string } }) => i.metadata.operation)).to.include('folders_entries_move');
    expect((await call({ operationId: 'tasks_list' })).status).to.equal(200);
    // No built operation of this set starts a task: an unknown id reaches the handler (404 naming it).
    const task = await call({ operationId: 'tasks_get', path: { task_id: 't_generated' } });
    expect([task.status, task.data.error]).to.deep.equal([404, "task 't_generated' not found"]);
    const logs = await call({ operationId: 'tasks_logs', path: { task_id: 't_generated' }, query: { after_line: 0, limit: 10 } });
    expect(logs.status).to.equal(404);

    expect((await call({ operationId: 'proxy_config_get' })).status).to.equal(200);
    const move = await call({ operationId: 'proxy_move', body: { peer_id: self } });
    expect(move.status, JSON.stringify(move.data)).to.equal(200);

    expect((await call({ operationId: 'folders_delete', path: { folder_id: folderId } })).status).to.equal(200);
    expect(fs.existsSync(root)).to.equal(false);
  });

  it('reaches every other built operation with sample arguments, routed to that operation', async function () {
    this.timeout(120_000);
    const called = new Set(done.map((c) => c.operationId));
    const rest = operations.filter((o) => built.includes(o.name) && !called.has(o.name));
    if (rest.length) process.stdout.write(`      (no scenario yet for ${rest.map((o) => o.name).join(', ')}: called with sample arguments)\n`);
    for (const op of rest) await call(sampleCall(op));
    const missing = built.filter((n) => !done.some((c) => c.operationId === n));
    expect(missing, 'built operations never called').to.deep.equal([]);
  });

  it('every call was routed to the operation it named (request log), none refused by routing', async function () {
    this.timeout(60_000);
    expect(done.length).to.be.greaterThan(20);
    for (const c of done) {
      const line = await logOf(c.requestId);
      expect(line.op, `${c.operationId} ${c.method} ${c.key}`).to.equal(c.operationId);
      expect(c.status, `${c.operationId}: ${JSON.stringify(c.data)}`).to.not.be.oneOf([405, 501]);
      if (c.status === 404) expect(String(c.data?.error), c.operationId).to.not.match(/^no endpoint/);
      // The client sent nested paths percent-encoded, as one segment.
      if (Object.values(c.path ?? {}).some((v) => String(v).includes('/'))) expect(line.path, c.operationId).to.match(/%2F/);
    }
    expect(done.filter((c) => Object.values(c.path ?? {}).some((v) => String(v).includes('/'))).length).to.be.at.least(4);
  });

  it('the same calls type-check against the generated types', async function () {
    this.timeout(120_000);
    expect(fs.existsSync(path.join(dir, 'schema.d.ts')), 'types generated').to.equal(true);
    const lines = done.map((c) => {
      const params: string[] = [];
      if (c.path) params.push(`path: ${JSON.stringify(c.path)}`);
      if (c.query) params.push(`query: ${JSON.stringify(c.query)}`);
      const init = [`params: { ${params.join(', ')} }`];
      if (c.body !== undefined) init.push(`body: ${JSON.stringify(c.body)}`);
      return `  await client.${c.method}(${JSON.stringify(c.key)}, { ${init.join(', ')} });`;
    });
    const program = [
      "import createClient from 'openapi-fetch';",
      "import type { paths } from './schema.js';",
      "const client = createClient<paths>({ baseUrl: 'http://127.0.0.1:1' });",
      'export async function replay(): Promise<void> {',
      ...lines,
      '}',
      // A call the types must refuse: the move's argument under its registry name.
      'export async function wrong(): Promise<void> {',
      `  // @ts-expect-error the document names this parameter sub_path`,
      `  await client.PATCH('/api/v1/folders/{folder_id}/entries/{sub_path}', { params: { path: { folder_id: 'f', src_sub_path: 'a' } }, body: {} });`,
      '}',
      '',
    ].join('\n');
    const file = path.join(dir, 'calls.ts');
    fs.writeFileSync(file, program);
    const prog = ts.createProgram([file], {
      noEmit: true,
      strict: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      skipLibCheck: true,
      types: [],
    });
    const diags = ts.getPreEmitDiagnostics(prog).map((x) => {
      const where = x.file && x.start !== undefined ? `${path.basename(x.file.fileName)}:${x.file.getLineAndCharacterOfPosition(x.start).line + 1}` : '';
      return `${where} ${ts.flattenDiagnosticMessageText(x.messageText, '\n')}`;
    });
    expect(diags, program.split('\n').length + ' lines').to.deep.equal([]);
    expect(lines.length).to.equal(done.length);
  });

  /** A call with sample arguments from the registry, under the document's names. */
  function sampleCall(op: Operation): Call {
    const found = byId.get(op.name)!;
    const docParams = (found.op.parameters ?? []) as Doc[];
    const pathArgs: Record<string, string | number> = {};
    const values = pathValues(op);
    for (const [name, schema] of Object.entries(op.params)) {
      const shown = docParams.find((p) => p.in === 'path' && (p['x-argument'] ?? p.name) === name)!.name as string;
      pathArgs[shown] = primaryType(schema) === 'integer' ? Number(values[name]) : values[name];
    }
    const args = minimalArgs(op);
    const c: Call = { operationId: op.name };
    if (Object.keys(pathArgs).length) c.path = pathArgs;
    if (takesBody(op)) c.body = args;
    else if (Object.keys(args).length) {
      // Object-valued query arguments are JSON text in the document.
      c.query = Object.fromEntries(Object.entries(args).map(([k, v]) => [k, typeof v === 'object' && v !== null ? JSON.stringify(v) : v]));
    }
    return c;
  }
});
