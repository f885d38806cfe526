/**
 * Helpers for the conformance walk and the bad-input tests. Everything here is
 * derived from the registry `operations` and their schemas: sample arguments,
 * concrete URLs, the methods a URL offers, wrong-typed values. No endpoint is
 * listed by hand.
 */
import { resultProblem, schemaTypes } from '../../api/validate.js';
import http from 'node:http';
import { expect } from 'chai';
import type { JsonSchema, Method, Operation } from '../../api/registry/types.js';
import { ALL_SCOPES, isGreedyParam, operations } from '../../api/registry/index.js';

import { API_PREFIX as API } from '../../api/catalog.js';

export { API };
export const METHODS: readonly Method[] = ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'];
export const takesBody = (op: Operation): boolean => op.method === 'POST' || op.method === 'PATCH' || op.method === 'PUT';
export const ONE_MIB = 1048576;

// ---------------------------------------------------------------------------
// Schemas

/** Every JSON type a schema admits (from `type` and `anyOf`/`oneOf`). */
export function typesOf(schema: JsonSchema): string[] {
  return [...schemaTypes(schema)];
}

/** The first non-null type, which sample values are made of. */
export function primaryType(schema: JsonSchema): string {
  return typesOf(schema).find((t) => t !== 'null') ?? 'null';
}

/** The schema of the non-null alternative (for `anyOf: [X, null]`). */
export function nonNull(schema: JsonSchema): JsonSchema {
  const alts = schema.anyOf;
  if (Array.isArray(alts)) {
    const a = (alts as JsonSchema[]).find((s) => primaryType(s) !== 'null');
    if (a) return a;
  }
  return schema;
}

export const props = (op: Operation): Record<string, JsonSchema> => (op.schema.properties ?? {}) as Record<string, JsonSchema>;

/**
 * A valid value for a schema: its example (the argument rules of
 * api/registry/schema.ts give one that fits their pattern), else the first
 * enum value, the minimum, required properties only.
 */
export function sampleValue(schemaIn: JsonSchema, overrides: Record<string, unknown> = {}): unknown {
  if (Array.isArray(schemaIn.examples) && schemaIn.examples.length) return schemaIn.examples[0];
  const schema = nonNull(schemaIn);
  if (Array.isArray(schema.examples) && schema.examples.length) return schema.examples[0];
  if (Array.isArray(schema.enum)) return (schema.enum as unknown[]).find((v) => v !== null);
  switch (primaryType(schema)) {
    case 'string': {
      if (schema.format === 'date-time') return '2024-01-02T03:04:05Z';
      const min = typeof schema.minLength === 'number' ? schema.minLength : 1;
      return 'x'.repeat(Math.max(1, min));
    }
    case 'integer':
    case 'number': {
      let v = 1;
      if (typeof schema.minimum === 'number' && v < schema.minimum) v = schema.minimum;
      if (typeof schema.maximum === 'number' && v > schema.maximum) v = schema.maximum;
      return v;
    }
    case 'boolean':
      return true;
    case 'array': {
      const n = typeof schema.minItems === 'number' ? schema.minItems : 0;
      return Array.from({ length: n }, () => sampleValue((schema.items ?? {}) as JsonSchema, overrides));
    }
    case 'object': {
      const out: Record<string, unknown> = {};
      const p = (schema.properties ?? {}) as Record<string, JsonSchema>;
      for (const r of (schema.required ?? []) as string[]) out[r] = r in overrides ? overrides[r] : sampleValue(p[r] ?? {}, overrides);
      return out;
    }
    default:
      return null;
  }
}

/** Required body/query arguments with sample values (path parameters excluded); overrides by argument name. */
/**
 * Arguments without which a valid call would send traffic off this machine
 * (the network rule: tests reach only loopback and namespaces they made).
 * `locations_discover` without a host broadcasts on every interface.
 */
const STAY_ON_LOOPBACK: Record<string, Record<string, unknown>> = {
  locations_discover: { host: '127.0.0.1' },
};

/**
 * The one valid call whose answer is another host's: discovery of a share
 * host kept on loopback (the network rule), where no SMB server listens, is
 * that host's 502 naming it, not a defect of the daemon.
 */
export const absentUpstream = (op: Operation, r: RawReply): boolean =>
  op.name === 'locations_discover' && r.status === 502 && String(r.body?.error ?? '').startsWith("cannot reach SMB host '127.0.0.1'");

export function minimalArgs(op: Operation, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const out: Record<string, unknown> = { ...(STAY_ON_LOOPBACK[op.name] ?? {}) };
  for (const name of op.required ?? []) out[name] = name in overrides ? overrides[name] : sampleValue(op.args[name] ?? {}, overrides);
  return out;
}

/** Path parameter values: integer ids 1, strings 'x', unless overridden by name. */
export function pathValues(op: Operation, overrides: Record<string, unknown> = {}): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, schema] of Object.entries(op.params)) {
    out[name] = name in overrides ? String(overrides[name]) : primaryType(schema) === 'integer' ? '1' : 'x';
  }
  return out;
}

/** The concrete path (with /api/v1) of an operation; greedy sub-path values keep their '/'. */
export function concretePath(op: Operation, values: Record<string, string> = pathValues(op)): string {
  return (
    API +
    op.path.replace(/\{([^}]+)\}/g, (_m, name: string) => {
      const v = values[name];
      return isGreedyParam(name) ? v.split('/').map(encodeURIComponent).join('/') : encodeURIComponent(v);
    })
  );
}

/** How an argument value travels in a query string: strings as they are, everything else as JSON text. */
export function queryText(value: unknown): string {
  return typeof value === 'string' ? value : JSON.stringify(value);
}

export function queryString(args: Record<string, unknown>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(args)) q.append(k, queryText(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}

export interface CallSpec {
  method: string;
  path: string;
  body?: string;
}

/** The request for an operation with these arguments: query string for GET/DELETE, JSON body otherwise. */
export function callFor(op: Operation, args: Record<string, unknown>, pathOverrides: Record<string, unknown> = {}): CallSpec {
  const path = concretePath(op, pathValues(op, pathOverrides));
  if (takesBody(op)) return { method: op.method, path, body: JSON.stringify(args) };
  return { method: op.method, path: path + queryString(args) };
}

/**
 * A value of the wrong type for a schema, as a JSON value (for a body) and as
 * query text (undefined when a query string cannot carry a wrong type: every
 * query value is a string, so a string argument always fits).
 */
export function wrongValue(schema: JsonSchema): { json: unknown; text?: string; what: string } {
  const types = typesOf(schema);
  if (types.includes('string')) return { json: 123, what: 'string given 123' };
  if (types.includes('integer') || types.includes('number')) return { json: 'abc', text: 'abc', what: 'integer given "abc"' };
  if (types.includes('boolean')) return { json: 'yes', text: 'yes', what: 'boolean given "yes"' };
  if (types.includes('object')) return { json: 5, text: '5', what: 'object given 5' };
  if (types.includes('array')) return { json: 5, text: '5', what: 'array given 5' };
  return { json: {}, what: 'given an object' };
}

// ---------------------------------------------------------------------------
// Routing, derived from the registry templates

/**
 * How a registry template matches a concrete path (after /api/v1, still
 * percent-encoded; each segment is decoded): one rank per segment, 2 for a
 * literal, 1 for a parameter (or the first segment of a `*sub_path` one), 0
 * for the later segments of a `*sub_path` parameter; undefined when it does
 * not match. An integer parameter takes only an integer unless `strictIntegers`
 * is false.
 */
export function templateRanks(op: Operation, rawPath: string, strictIntegers = true): number[] | undefined {
  const segs = rawPath
    .split('/')
    .filter(Boolean)
    .map((s) => decodeURIComponent(s));
  const go = (ti: number, si: number): number[] | undefined => {
    if (ti === op.segments.length) return si === segs.length ? [] : undefined;
    const t = op.segments[ti];
    if (!t.startsWith('{')) {
      if (si >= segs.length || segs[si] !== t) return undefined;
      const rest = go(ti + 1, si + 1);
      return rest && [2, ...rest];
    }
    const name = t.slice(1, -1);
    if (isGreedyParam(name)) {
      for (let end = segs.length; end > si; end--) {
        const rest = go(ti + 1, end);
        if (rest) return [1, ...Array(end - si - 1).fill(0), ...rest];
      }
      return undefined;
    }
    if (si >= segs.length) return undefined;
    if (strictIntegers && primaryType(op.params[name] ?? {}) === 'integer' && !/^-?\d+$/.test(segs[si])) return undefined;
    const rest = go(ti + 1, si + 1);
    return rest && [1, ...rest];
  };
  return go(0, 0);
}

export function templateMatches(op: Operation, rawPath: string, strictIntegers = true): boolean {
  return templateRanks(op, rawPath, strictIntegers) !== undefined;
}

/**
 * The registry methods of the resource at a concrete path (with /api/v1),
 * sorted. The resource is the matching templates that no other matching
 * template beats, where a template beats another when, at the first segment
 * both rank (0 is not ranked) and rank differently, it has the literal. A
 * segment that is not an integer fits an integer parameter only when no
 * template fits the path otherwise (`/vms/abc` is `/vms/{id}` with a bad id,
 * `/vms/images` is not).
 */
export function registryMethodsAt(fullPath: string): string[] {
  const rel = fullPath.slice(API.length).split('?')[0];
  const rank = (strict: boolean) =>
    operations.map((op) => ({ op, ranks: templateRanks(op, rel, strict) })).filter((c): c is { op: Operation; ranks: number[] } => c.ranks !== undefined);
  let found = rank(true);
  if (!found.length) found = rank(false);
  const beats = (a: number[], b: number[]) => {
    for (let i = 0; i < a.length; i++) if (a[i] && b[i] && a[i] !== b[i]) return a[i] > b[i];
    return false;
  };
  const top = found.filter((c) => !found.some((o) => o !== c && beats(o.ranks, c.ranks)));
  return [...new Set(top.map((c) => c.op.method))].sort();
}

/** The Allow header a path should answer with: its registry methods, HEAD where GET is, and OPTIONS; sorted. */
export function allowAt(fullPath: string): string[] {
  const m = registryMethodsAt(fullPath);
  if (!m.length) return [];
  return [...m, ...(m.includes('GET') ? ['HEAD'] : []), 'OPTIONS'].sort();
}

/** A scope the operation does not name (for 403 checks). */
export function unrelatedScope(op: Operation): string {
  const s = [...ALL_SCOPES].sort().find((x) => !op.scopes.includes(x));
  if (!s) throw new Error(`no scope outside ${op.name}'s`);
  return s;
}

// ---------------------------------------------------------------------------
// HTTP

export interface RawReply {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
  body: any;
}

export interface RawOptions {
  token?: string;
  headers?: Record<string, string>;
  /** Sent with a content-length unless `chunked`. */
  body?: string | Buffer;
  chunked?: boolean;
  /** A request that takes longer fails the test as a hang. */
  timeoutMs?: number;
}

/**
 * A request through node:http: any method may carry a body and the path is
 * sent exactly as given (no URL normalisation), unlike fetch.
 */
export function raw(baseUrl: string, method: string, path: string, opts: RawOptions = {}): Promise<RawReply> {
  const u = new URL(baseUrl);
  const headers: Record<string, string | number> = { ...(opts.headers ?? {}) };
  if (opts.token) headers.authorization = `Bearer ${opts.token}`;
  const body = opts.body === undefined ? undefined : Buffer.isBuffer(opts.body) ? opts.body : Buffer.from(opts.body, 'utf8');
  if (body && !opts.chunked) headers['content-length'] = body.length;
  // node:http chunks bodies by default only for some methods: say it for all.
  if (body && opts.chunked) headers['transfer-encoding'] = 'chunked';
  if (body && !headers['content-type']) headers['content-type'] = 'application/json';
  const timeoutMs = opts.timeoutMs ?? 15_000;
  return new Promise((resolve, reject) => {
    let settled = false;
    const req = http.request({ host: u.hostname, port: u.port, method, path, headers, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        clearTimeout(timer);
        settled = true;
        const text = Buffer.concat(chunks).toString('utf8');
        let parsed: unknown;
        try {
          parsed = text ? JSON.parse(text) : undefined;
        } catch {
          parsed = undefined;
        }
        resolve({ status: res.statusCode ?? 0, headers: res.headers, text, body: parsed });
      });
      res.on('error', (e) => {
        if (!settled) {
          settled = true;
          reject(e);
        }
      });
    });
    const timer = setTimeout(() => {
      if (!settled) {
        settled = true;
        req.destroy();
        reject(new Error(`${method} ${path.slice(0, 200)}: no answer within ${timeoutMs} ms (hang)`));
      }
    }, timeoutMs);
    req.on('error', (e: NodeJS.ErrnoException) => {
      if (settled) return;
      const fail = () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        reject(e);
      };
      // The server may answer and close while a large body is still going out:
      // give its answer a moment to be read before calling it a failure.
      if (e.code === 'EPIPE' || e.code === 'ECONNRESET') setTimeout(fail, 300);
      else fail();
    });
    if (body && opts.chunked) {
      const step = 64 * 1024;
      for (let i = 0; i < body.length; i += step) req.write(body.subarray(i, i + step));
      req.end();
    } else req.end(body);
  });
}

/**
 * Why a success answer does not fit its operation's result schema, or
 * undefined (it fits, it is not a success, or the operation has no result
 * schema yet). HEAD answers carry no body and are not checked.
 */
export function resultMismatch(op: Operation, r: RawReply): string | undefined {
  if (r.status < 200 || r.status > 299 || !op.result || r.text === '') return undefined;
  if (op.textResult) {
    // A text answer (the metrics exposition): one of its media types, not JSON.
    const type = String(r.headers['content-type'] ?? '');
    return op.textResult.includes(type) ? undefined : `content-type ${type} is not one of ${op.textResult.join(', ')}`;
  }
  if (r.body === undefined) return `success answer is not JSON: ${r.text.slice(0, 200)}`;
  return resultProblem(op, r.body);
}

/** A compact description of a reply for failure lists. */
export const show = (r: RawReply): string => `${r.status} ${r.text.slice(0, 200)}`;

/**
 * The reply is an error of this status whose body is exactly {"error": "<string>"}
 * and whose message contains every one of `mentions`. Returns a problem text, or
 * undefined when it conforms (walks collect problems and assert none at the end).
 */
export function errorProblem(r: RawReply, status: number, ...mentions: string[]): string | undefined {
  if (r.status !== status) return `expected ${status}, got ${show(r)}`;
  const b = r.body;
  if (!b || typeof b !== 'object' || Array.isArray(b)) return `error body is not a JSON object: ${r.text.slice(0, 200)}`;
  const keys = Object.keys(b);
  if (keys.length !== 1 || keys[0] !== 'error') return `error body keys are ${JSON.stringify(keys)}, not ["error"]`;
  if (typeof b.error !== 'string' || b.error === '') return `error is not a non-empty string: ${r.text}`;
  if (!String(r.headers['content-type'] ?? '').startsWith('application/json')) return `content-type ${r.headers['content-type']}`;
  for (const m of mentions) if (!b.error.includes(m)) return `message '${b.error}' does not mention '${m}'`;
  return undefined;
}

export function expectError(r: RawReply, status: number, ...mentions: string[]): void {
  const p = errorProblem(r, status, ...mentions);
  expect(p, p).to.equal(undefined);
}

/** Collects problems of a walk; `check` asserts none with the whole list in the message. */
export class Problems {
  readonly list: string[] = [];
  checked = 0;

  add(where: string, problem: string | undefined): void {
    this.checked++;
    if (problem) this.list.push(`${where}: ${problem}`);
  }

  check(minChecked = 1): void {
    expect(this.list, `${this.list.length} of ${this.checked} checks failed:\n  ${this.list.join('\n  ')}`).to.deep.equal([]);
    expect(this.checked, 'number of checks made').to.be.at.least(minChecked);
  }
}

/** Runs `fn` over items with at most `n` in flight. */
export async function pool<T>(items: readonly T[], n: number, fn: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (i < items.length) await fn(items[i++]);
    }),
  );
}

/** The domain module that serves a registry domain (templates are the vms domain's). */
export const moduleOf = (op: Operation): string => (op.domain === 'templates' ? 'vms' : op.domain);

/**
 * Domains whose host program is unavailable on this daemon's host, from
 * GET /system/health: their calls may answer 503 (and must say what is
 * missing), never pretend.
 */
export async function unavailableDomains(baseUrl: string, token: string): Promise<Set<string>> {
  const r = await raw(baseUrl, 'GET', `${API}/system/health`, { token });
  if (r.status !== 200) throw new Error(`system health: ${show(r)}`);
  const domains = JSON.parse(r.text).domains as Array<{ name: string; runtimes: Array<{ available: boolean }> }>;
  return new Set(domains.filter((d) => d.runtimes.some((x) => !x.available)).map((d) => d.name));
}

/** A 503 that names what is unavailable, from a domain whose runtime is missing. */
export function runtimeMissing(op: Operation, r: RawReply, missing: Set<string>): boolean {
  return r.status === 503 && missing.has(moduleOf(op)) && /\bnot (available|reachable|installed|running)\b/.test(r.text);
}
