/**
 * Result schemas in the registry (api/registry): `result` on an operation,
 * `ResultOf<N>` and handler types checked against it, the schema in the
 * catalog, OpenAPI's success response and the MCP tool's outputSchema, the
 * check the conformance walk makes of every success answer, and the shared
 * pieces answers reuse (task record, activity row, error body). Every
 * operation has one except events_stream, a stream of events rather than an
 * answer.
 */
import { expect } from 'chai';
import { complete, getOperation, operations, type ResultOf } from '../../api/registry/index.js';
import type { OpHandler } from '../../api/registry/handlers.js';
import { activityRow, errorBody, taskRecord } from '../../api/registry/schema.js';
import type { ActivityRow, OperationSpec, ValueOf } from '../../api/registry/types.js';
import { catalogEntries, openApiDocument } from '../../api/catalog.js';
import { resultProblem } from '../../api/validate.js';
import { toolFor } from '../../api/mcp/tools.js';
import { STATUS_META, toolError } from '../../api/mcp/server.js';
import { conflict } from '../../daemon/lib/errors.js';
import type { TaskRecord } from '../../daemon/lib/tasks.js';

// ---- compile-time: these lines are the test (the build fails if one is wrong).

/** True only when A and B are each assignable to the other. */
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const taskRecordMatchesTheLib: Same<ValueOf<ReturnType<typeof taskRecord>>, TaskRecord> = true;
const activityRowMatchesTheRegistry: Same<ValueOf<ReturnType<typeof activityRow>>, ActivityRow> = true;
const catalogResult: Same<ResultOf<'catalog_get'>['count'], number> = true;
const folderIds: Same<ResultOf<'folders_list'>['folders'][number]['folder_id'], string> = true;
const aStreamHasNone: Same<ResultOf<'events_stream'>, unknown> = true;
void [taskRecordMatchesTheLib, activityRowMatchesTheRegistry, catalogResult, folderIds, aStreamHasNone];

const fits: OpHandler<'catalog_get'> = async () => ({ count: 0, endpoints: [] });
// @ts-expect-error a count that is not a number does not fit catalog_get's result schema
const wrongType: OpHandler<'catalog_get'> = async () => ({ count: 'none', endpoints: [] });
// @ts-expect-error a required field missing
const missingField: OpHandler<'catalog_get'> = async () => ({ count: 0 });
// A field the schema does not name compiles (TypeScript checks no excess property on a returned
// object): the schemas are closed, so the conformance walk is what catches it (resultProblem below).
const unconstrained: OpHandler<'folders_list'> = async () => ({ folders: [], anything: 1 });
void [fits, wrongType, missingField, unconstrained];

// ---- run time

const catalogOp = getOperation('catalog_get')!;
const foldersOp = getOperation('folders_list')!;
/** The one operation without a result schema: its answer is a stream (SSE or WebSocket), not a JSON body. */
const STREAMS = ['events_stream'];

describe('result schemas (api/registry)', () => {
  it('every operation has a closed object as its result schema, except the event stream', () => {
    expect(catalogOp.result).to.include({ type: 'object', additionalProperties: false });
    const without = operations.filter((o) => !o.result).map((o) => o.name);
    expect(without).to.deep.equal(STREAMS);
    // Closed: the object names every field, or (locations_discover) each of its alternatives does.
    const closed = (r: { additionalProperties?: unknown; oneOf?: Array<{ additionalProperties?: unknown }> }) =>
      r.additionalProperties === false || (!!r.oneOf?.length && r.oneOf.every((alt) => alt.additionalProperties === false));
    for (const o of operations) if (o.result) expect(o.result.type === 'object' && closed(o.result as never), o.name).to.equal(true);
  });

  it('a result schema must be an object schema (MCP outputSchema; every answer is an object)', () => {
    const spec = { ...(catalogOp as unknown as OperationSpec), name: 'x_get', result: { type: 'array' } };
    expect(() => complete(spec)).to.throw("registry: the result schema of x_get must have type 'object' at its root");
  });

  it("the catalog this build answers fits catalog_get's result schema, and each entry carries its operation's result schema", () => {
    const endpoints = catalogEntries();
    expect(resultProblem(catalogOp, { count: endpoints.length, endpoints })).to.equal(undefined);
    expect(endpoints.find((e) => e.operation === 'catalog_get')!.result).to.deep.equal(catalogOp.result);
    expect(endpoints.find((e) => e.operation === 'folders_list')!.result).to.deep.equal(foldersOp.result);
    expect(endpoints.find((e) => e.operation === 'events_stream')!.result).to.equal(null);
  });

  it('resultProblem names what does not fit: a missing field, a wrong type, a field the schema does not name', () => {
    const entry = catalogEntries()[0];
    expect(resultProblem(catalogOp, { endpoints: [] })).to.match(/^result \(root\) must have required property 'count'/);
    expect(resultProblem(catalogOp, { count: 1, endpoints: [{ ...entry, read_only: 'yes' }] })).to.match(/^result\/endpoints\/0\/read_only must be boolean/);
    expect(resultProblem(catalogOp, { count: 1, endpoints: [], extra: 1 })).to.match(/^result \(root\) must NOT have additional properties/);
    expect(resultProblem(foldersOp, { folders: [{ folder_id: 'f_1', name: 'a', storage_id: 'p', path: '/p/a' }] })).to.match(
      /^result\/folders\/0 must have required property 'created_at'/,
    );
    expect(resultProblem(getOperation('events_stream')!, { anything: 1 }), 'a stream: no schema, nothing to check').to.equal(undefined);
  });

  it("OpenAPI: the success response is the operation's result schema; errors are the shared error body", () => {
    const doc = openApiDocument('0.0.0') as any;
    const get = doc.paths['/api/v1/catalog'].get;
    expect(get.responses['200'].content['application/json'].schema).to.deep.equal(catalogOp.result);
    expect(doc.paths['/api/v1/folders'].get.responses['200'].content['application/json'].schema).to.deep.equal(foldersOp.result);
    expect(doc.components.schemas.Error).to.deep.equal(errorBody());
    expect(get.responses['404'].content['application/json'].schema).to.deep.equal({ $ref: '#/components/schemas/Error' });
  });

  it("MCP: every tool's outputSchema is its operation's result schema (the event stream is no tool)", () => {
    expect(toolFor(catalogOp).outputSchema).to.deep.equal(catalogOp.result);
    expect(toolFor(foldersOp).outputSchema).to.deep.equal(foldersOp.result);
    for (const o of operations.filter((op) => op.mcp)) expect(toolFor(o).outputSchema, o.name).to.deep.equal(o.result);
    expect(operations.filter((o) => STREAMS.includes(o.name)).map((o) => o.mcp)).to.deep.equal([false]);
  });

  it('MCP: an error result carries structuredContent only for a tool without outputSchema; the status is in _meta either way', () => {
    const plain = toolError(conflict('VM 1 is busy'));
    expect(plain).to.deep.include({ isError: true, structuredContent: { error: 'VM 1 is busy', status: 409 } });
    const typed = toolError(conflict('VM 1 is busy'), true);
    expect(typed).to.not.have.property('structuredContent');
    expect(typed.content).to.deep.equal([{ type: 'text', text: JSON.stringify({ error: 'VM 1 is busy' }) }]);
    for (const r of [plain, typed]) expect(r._meta).to.deep.equal({ [STATUS_META]: 409 });
  });

  it('the shared pieces validate what the daemon writes: a task record, an activity row, an error body', () => {
    const at = '2026-11-24T10:00:00.000Z';
    const task: TaskRecord = {
      task_id: 'task_1',
      kind: 'lxc.image.download',
      title: 'Download',
      state: 'running',
      progress: 40,
      node_id: 'n1',
      owner: 'admin',
      resource: 'lxc/images/deb',
      target: 'lxc/images/deb',
      created_at: at,
      started_at: at,
      finished_at: null,
      result: null,
      error: null,
      log_lines: 2,
    };
    const row: ActivityRow = {
      id: 'r1',
      timestamp: at,
      category: 'system',
      severity: 'info',
      summary: 's',
      target: 't',
      actor: 'admin',
      metadata: { transport: 'api', operation: 'x' },
    };
    let n = 0;
    // resultProblem compiles once per operation name: one name per check.
    const check = (schema: object, value: unknown) => resultProblem({ name: `piece_${++n}`, result: schema } as never, value);
    expect(check(taskRecord(), task)).to.equal(undefined);
    expect(check(taskRecord(), { ...task, state: 'paused' })).to.match(/state must be equal to one of the allowed values/);
    expect(check(activityRow(), row)).to.equal(undefined);
    expect(check(activityRow(), { ...row, metadata: {} })).to.match(/metadata must have required property 'transport'/);
    expect(check(errorBody(), { error: 'x' })).to.equal(undefined);
    expect(check(errorBody(), { error: 'x', status: 4 })).to.match(/must NOT have additional properties/);
  });
});
