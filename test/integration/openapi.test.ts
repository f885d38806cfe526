/**
 * GET /api/v1/openapi.json from a real daemon: a valid OpenAPI 3.1 document
 * (checked with @seriousme/openapi-schema-validator, and every embedded schema
 * compiled as JSON Schema 2020-12) with one operation per registry operation.
 */
import { expect } from 'chai';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { JsonSchema } from '../../api/registry/types.js';
import fs from 'node:fs';
import path from 'node:path';
import { isGreedyParam, operations } from '../../api/registry/index.js';
import { openApiPaths } from '../../api/catalog.js';
import { ROOT, runCommand, startDaemon, tempDir, type TestDaemon } from '../helpers/daemon.js';
import { API, Problems, nonNull, primaryType, takesBody, typesOf } from '../helpers/conformance.js';

type Doc = Record<string, any>;

describe('GET /api/v1/openapi.json', function () {
  let d: TestDaemon;
  let doc: Doc;

  before(async function () {
    this.timeout(60_000);
    d = await startDaemon();
    const r = await d.request('GET', `${API}/openapi.json`);
    expect(r.status).to.equal(200);
    expect(r.headers['content-type']).to.match(/^application\/json/);
    doc = r.body;
  });

  const keys = openApiPaths();
  const opOf = (name: string) => {
    const op = operations.find((o) => o.name === name)!;
    return doc.paths[keys.get(op)!.key]?.[op.method.toLowerCase()];
  };
  /** The OpenAPI name of an operation's path parameter (the argument's own name unless the path is shared). */
  const paramName = (name: string, arg: string) => keys.get(operations.find((o) => o.name === name)!)!.names[arg];

  const REDOCLY = path.join(ROOT, 'node_modules/@redocly/cli/bin/cli.js');
  const LINT_CONFIG = path.join(ROOT, 'test/conformance/redocly/redocly.yaml');
  /** `redocly lint` on a document, offline (no telemetry, no update check): its exit status and problems. */
  async function lint(document: unknown): Promise<{ code: number; problems: Array<{ ruleId: string; message: string; severity: string }>; stderr: string }> {
    const file = path.join(tempDir('hostd-lint-'), 'openapi.json');
    fs.writeFileSync(file, JSON.stringify(document));
    const r = await runCommand(process.execPath, [REDOCLY, 'lint', file, '--config', LINT_CONFIG, '--format=json'], {
      env: { REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true', REDOCLY_SUPPRESS_NOTIFICATIONS: 'true', NO_COLOR: '1' },
      timeoutMs: 60_000,
    });
    let parsed: { problems?: unknown[] } = {};
    try {
      parsed = JSON.parse(r.stdout.slice(r.stdout.indexOf('{')));
    } catch {
      throw new Error(`redocly printed no JSON report (exit ${r.code}): ${r.stdout.slice(0, 500)} ${r.stderr.slice(0, 1000)}`);
    }
    return { code: r.code, problems: (parsed.problems ?? []) as Array<{ ruleId: string; message: string; severity: string }>, stderr: r.stderr };
  }

  it('validates as OpenAPI 3.1', async () => {
    expect(doc.openapi).to.match(/^3\.1\./);
    const v = new Validator();
    const res = await v.validate(doc);
    expect(res.errors ?? [], JSON.stringify(res.errors, null, 1)?.slice(0, 2000)).to.satisfy((e: unknown) => !e || (Array.isArray(e) && e.length === 0));
    expect(res.valid).to.equal(true);
    expect(v.version).to.equal('3.1');
  });

  it('is lint clean under Redocly (recommended-strict, with no-ambiguous-paths reading parameter types)', async function () {
    this.timeout(90_000);
    const r = await lint(doc);
    expect(r.problems.map((x) => `${x.severity} ${x.ruleId}: ${x.message}`)).to.deep.equal([]);
    expect(r.code, r.stderr).to.equal(0);
  });

  it("the linter's typed path rule still fails a document whose integer ids could be taken for a literal", async function () {
    this.timeout(90_000);
    // The same document with `/vms/{id}` typed as a string: `/vms/images/{image_id}`
    // and `/vms/{id}/start` then really are ambiguous.
    const broken = JSON.parse(JSON.stringify(doc));
    for (const [key, item] of Object.entries<Doc>(broken.paths)) {
      if (!key.startsWith(`${API}/vms/{id}`)) continue;
      for (const o of Object.values<Doc>(item)) for (const prm of o.parameters) if (prm.name === 'id') prm.schema = { type: 'string' };
    }
    const r = await lint(broken);
    expect(r.code).to.not.equal(0);
    const rules = new Set(r.problems.map((x) => x.ruleId));
    expect([...rules]).to.deep.equal(['hostd/no-ambiguous-paths']);
    expect(r.problems.some((x) => x.message.includes(`${API}/vms/images/{image_id}`))).to.equal(true);
  });

  it('has no two paths of the same shape; an operation whose argument is named otherwise says which in x-argument', () => {
    const shapes = Object.keys(doc.paths).map((k) => k.replace(/\{[^}]+\}/g, '{}'));
    expect(shapes.length).to.equal(new Set(shapes).size);
    // The pair the spec names differently: one path item, with both methods.
    const item = doc.paths[`${API}/folders/{folder_id}/entries/{sub_path}`];
    expect(Object.keys(item).sort()).to.deep.equal(['delete', 'patch']);
    const moved = item.patch.parameters.find((x: Doc) => x.in === 'path' && x.name === 'sub_path');
    expect(moved['x-argument']).to.equal('src_sub_path');
    expect(moved.description).to.contain('src_sub_path');
    expect(item.delete.parameters.find((x: Doc) => x.name === 'sub_path')['x-argument']).to.equal(undefined);
    // Every path parameter of every operation is in its path key, and only those.
    for (const [key, pathItem] of Object.entries<Doc>(doc.paths)) {
      const inKey = [...key.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
      for (const [m, o] of Object.entries<Doc>(pathItem)) {
        const declared = (o.parameters as Doc[])
          .filter((x) => x.in === 'path')
          .map((x) => x.name)
          .sort();
        expect(declared, `${m} ${key}`).to.deep.equal(inKey);
      }
    }
  });

  it('says how multi-segment path parameters are encoded (percent-encoded, one segment)', () => {
    expect(doc.info.description).to.contain('%2F');
    let seen = 0;
    for (const op of operations) {
      for (const name of Object.keys(op.params).filter(isGreedyParam)) {
        const prm = opOf(op.name).parameters.find((x: Doc) => x.in === 'path' && x.name === paramName(op.name, name));
        expect(prm.description, `${op.name} ${name}`).to.contain('%2F');
        seen++;
      }
    }
    expect(seen).to.be.at.least(3);
  });

  it('embeds only schemas that compile as JSON Schema 2020-12', () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
    const p = new Problems();
    const schemas: Array<[string, unknown]> = [];
    for (const [path, item] of Object.entries<Doc>(doc.paths)) {
      for (const [m, o] of Object.entries<Doc>(item)) {
        for (const prm of o.parameters ?? []) schemas.push([`${m} ${path} ${prm.name}`, prm.schema ?? prm.content?.['application/json']?.schema]);
        if (o.requestBody) schemas.push([`${m} ${path} body`, o.requestBody.content['application/json'].schema]);
      }
    }
    for (const [where, s] of schemas) {
      let problem: string | undefined;
      try {
        ajv.compile(s as object);
      } catch (e) {
        problem = (e as Error).message;
      }
      p.add(where, problem);
    }
    p.check(200);
  });

  it('has exactly one operation per registry operation, with its name as operationId', () => {
    const ids: string[] = [];
    for (const item of Object.values<Doc>(doc.paths)) for (const o of Object.values<Doc>(item)) ids.push(o.operationId);
    expect(ids).to.have.length(operations.length);
    expect([...ids].sort()).to.deep.equal(operations.map((o) => o.name).sort());
    const p = new Problems();
    for (const op of operations) p.add(op.name, opOf(op.name)?.operationId === op.name ? undefined : `not at ${op.method} ${API}${op.path}`);
    p.check(operations.length);
  });

  it('declares path parameters (required), GET/DELETE arguments as query parameters (object-valued ones as JSON content), bodies for the rest', () => {
    const p = new Problems();
    for (const op of operations) {
      const o = opOf(op.name);
      if (!o) continue;
      const params: Doc[] = o.parameters ?? [];
      for (const name of Object.keys(op.params)) {
        const prm = params.find((x) => x.name === paramName(op.name, name));
        p.add(`${op.name} path ${name}`, prm?.in === 'path' && prm.required === true ? undefined : JSON.stringify(prm));
      }
      const argNames = Object.keys((op.schema.properties ?? {}) as object).filter((n) => !(n in op.params));
      if (takesBody(op)) {
        const schema = o.requestBody?.content?.['application/json']?.schema;
        p.add(
          `${op.name} body`,
          schema && JSON.stringify(Object.keys(schema.properties ?? {}).sort()) === JSON.stringify([...argNames].sort())
            ? undefined
            : JSON.stringify(o.requestBody),
        );
        p.add(
          `${op.name} body required`,
          JSON.stringify(schema?.required ?? []) === JSON.stringify(op.required ?? []) ? undefined : JSON.stringify(schema?.required),
        );
        p.add(`${op.name} no query`, params.some((x) => x.in === 'query') ? 'body operation declares query parameters' : undefined);
      } else {
        p.add(`${op.name} no body`, o.requestBody ? 'GET/DELETE with a requestBody' : undefined);
        for (const name of argNames) {
          const prm = params.find((x) => x.name === name && x.in === 'query');
          const schema = (op.schema.properties as Record<string, JsonSchema>)[name];
          const structured = typesOf(schema).some((t) => t === 'object' || t === 'array');
          let problem: string | undefined;
          if (!prm) problem = 'missing';
          else if (prm.required !== (op.required ?? []).includes(name)) problem = `required ${prm.required}`;
          else if (structured && !prm.content?.['application/json']?.schema) problem = `object-valued but not JSON content: ${JSON.stringify(prm)}`;
          else if (!structured && !prm.schema) problem = `no schema: ${JSON.stringify(prm)}`;
          p.add(`${op.name} query ${name}`, problem);
        }
      }
    }
    p.check(operations.length);
    // The ones the issue names: target and labels travel as JSON text.
    const target = opOf('folders_contents_list').parameters.find((x: Doc) => x.name === 'target');
    expect(target.in).to.equal('query');
    expect(target.content['application/json'].schema).to.be.an('object');
    expect(primaryType(nonNull(target.content['application/json'].schema))).to.equal('object');
    const labels = opOf('sandboxes_list').parameters.find((x: Doc) => x.name === 'labels');
    expect(labels.content['application/json'].schema.type).to.equal('object');
  });

  it('documents JSON text for object-valued query arguments, the bearer scheme, scopes and the error body', () => {
    expect(doc.info.description).to.match(/JSON text/);
    const target = opOf('folders_search').parameters.find((x: Doc) => x.name === 'target');
    expect(target.description ?? '').to.match(/JSON/);
    expect(doc.components.securitySchemes.bearer).to.deep.include({ type: 'http', scheme: 'bearer' });
    expect(doc.components.schemas.Error).to.deep.include({ required: ['error'], additionalProperties: false });
    for (const op of operations) {
      const o = opOf(op.name);
      expect(o['x-scopes'], op.name).to.deep.equal([...op.scopes]);
      for (const code of ['400', '401', '403', '404', '405', '413']) {
        expect(o.responses[code]?.content?.['application/json']?.schema?.$ref, `${op.name} ${code}`).to.equal('#/components/schemas/Error');
      }
    }
  });

  it('has no implementation marks: every operation is served', () => {
    for (const op of operations) expect(opOf(op.name), op.name).to.not.have.property('x-implemented');
  });

  it('is served without a token (it is public description, not data)', async () => {
    const r = await d.request('GET', `${API}/openapi.json`);
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal(doc);
  });
});
