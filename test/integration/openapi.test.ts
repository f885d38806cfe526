/**
 * GET /api/v1/openapi.json from a real daemon: a valid OpenAPI 3.1 document
 * (checked with @seriousme/openapi-schema-validator, and every embedded schema
 * compiled as JSON Schema 2020-12) with one operation per registry operation.
 */
import { expect } from 'chai';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import type { JsonSchema } from '../../api/registry/types.js';
import { operations } from '../../api/registry/index.js';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { API, Problems, nonNull, primaryType, takesBody, typesOf } from '../helpers/conformance.js';

type Doc = Record<string, any>;

describe('GET /api/v1/openapi.json', function () {
  let d: TestDaemon;
  let doc: Doc;
  let catalog: Array<{ operation: string; implemented: boolean }>;

  before(async function () {
    this.timeout(60_000);
    d = await startDaemon();
    const r = await d.request('GET', `${API}/openapi.json`);
    expect(r.status).to.equal(200);
    expect(r.headers['content-type']).to.match(/^application\/json/);
    doc = r.body;
    const token = await d.token('openapi-reader', []);
    catalog = (await d.request('GET', `${API}/catalog`, { token })).body.endpoints;
  });

  const opOf = (name: string) => {
    const op = operations.find((o) => o.name === name)!;
    return doc.paths[API + op.path]?.[op.method.toLowerCase()];
  };

  it('validates as OpenAPI 3.1', async () => {
    expect(doc.openapi).to.match(/^3\.1\./);
    const v = new Validator();
    const res = await v.validate(doc);
    expect(res.errors ?? [], JSON.stringify(res.errors, null, 1)?.slice(0, 2000)).to.satisfy((e: unknown) => !e || (Array.isArray(e) && e.length === 0));
    expect(res.valid).to.equal(true);
    expect(v.version).to.equal('3.1');
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
    expect(ids).to.have.length(129);
    expect([...ids].sort()).to.deep.equal(operations.map((o) => o.name).sort());
    const p = new Problems();
    for (const op of operations) p.add(op.name, opOf(op.name)?.operationId === op.name ? undefined : `not at ${op.method} ${API}${op.path}`);
    p.check(129);
  });

  it('declares path parameters (required), GET/DELETE arguments as query parameters (object-valued ones as JSON content), bodies for the rest', () => {
    const p = new Problems();
    for (const op of operations) {
      const o = opOf(op.name);
      if (!o) continue;
      const params: Doc[] = o.parameters ?? [];
      for (const name of Object.keys(op.params)) {
        const prm = params.find((x) => x.name === name);
        p.add(`${op.name} path ${name}`, prm?.in === 'path' && prm.required === true ? undefined : JSON.stringify(prm));
      }
      const argNames = Object.keys((op.schema.properties ?? {}) as object).filter((n) => !(n in op.params));
      if (takesBody(op)) {
        const schema = o.requestBody?.content?.['application/json']?.schema;
        p.add(`${op.name} body`, schema && JSON.stringify(Object.keys(schema.properties ?? {}).sort()) === JSON.stringify([...argNames].sort()) ? undefined : JSON.stringify(o.requestBody));
        p.add(`${op.name} body required`, JSON.stringify(schema?.required ?? []) === JSON.stringify(op.required ?? []) ? undefined : JSON.stringify(schema?.required));
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
    p.check(129);
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

  it('marks implementation as the catalog does', () => {
    for (const e of catalog) expect(opOf(e.operation)['x-implemented'], e.operation).to.equal(e.implemented);
  });

  it('is served without a token (it is public description, not data)', async () => {
    const r = await d.request('GET', `${API}/openapi.json`);
    expect(r.status).to.equal(200);
    expect(r.body).to.deep.equal(doc);
  });
});
