/**
 * Argument validation against each operation's schema, compiled once. Error
 * messages name the argument and what was wrong, never its value (values may
 * be secrets). A rule built in api/registry/schema.ts says what it expects in
 * `x-expect`, and its 400 says that: "argument 'gateway' must be an IPv4 or
 * IPv6 address". Result schemas are compiled here too, for the conformance
 * walk (`resultProblem`).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { Operation, JsonSchema } from './registry/types.js';
import { badRequest } from '../daemon/lib/errors.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

// verbose: each error carries the schema it failed (for `x-expect`); its data is never printed.
const ajv = new Ajv({ allErrors: false, strict: false, allowUnionTypes: true, useDefaults: false, verbose: true });
addFormats(ajv);

const compiled = new Map<string, ValidateFunction>();

function validatorFor(op: Operation): ValidateFunction {
  let v = compiled.get(op.name);
  if (!v) {
    v = ajv.compile(op.schema);
    compiled.set(op.name, v);
  }
  return v;
}

/**
 * Compiles every operation's validator now. The daemon does not: compiling all
 * of them cost about 1 s of CPU at every start (measured on this 2-core
 * machine), while a daemon serves few of its operations and a validator
 * compiles in milliseconds on its first call; conformance tests call it to
 * see every schema compile.
 */
export function precompile(ops: readonly Operation[]): void {
  for (const op of ops) validatorFor(op);
}

export function validateArgs(op: Operation, args: unknown): void {
  if (typeof args !== 'object' || args === null || Array.isArray(args)) throw badRequest('arguments must be a JSON object');
  const v = validatorFor(op);
  if (!v(args)) throw badRequest(describeErrors(v.errors ?? [], op.schema));
}

const compiledResults = new Map<string, ValidateFunction>();

/**
 * Why `body` does not fit the operation's result schema (the first error,
 * with where in the body), or undefined when it fits or the operation has no
 * result schema yet.
 */
export function resultProblem(op: Operation, body: unknown): string | undefined {
  if (!op.result) return undefined;
  let v = compiledResults.get(op.name);
  if (!v) {
    v = ajv.compile(op.result);
    compiledResults.set(op.name, v);
  }
  if (v(body)) return undefined;
  const e = v.errors?.[0];
  return e ? `result${e.instancePath || ' (root)'} ${e.message ?? 'does not fit'} (${e.schemaPath})` : 'the result does not fit its schema';
}

const LENGTH_KEYWORDS = new Set(['maxLength', 'minLength', 'maxItems']);

/**
 * The words of the outermost rule (`x-expect`) that the error at
 * `schemaPath` is part of, for the value that failed: walking down the path
 * from that value's schema through its alternatives (anyOf, allOf, oneOf,
 * not), the first schema with words.
 */
function ruleWords(root: JsonSchema, schemaPath: string): string | undefined {
  const segs = schemaPath
    .replace(/^#\/?/, '')
    .split('/')
    .filter(Boolean)
    .map((x) => x.replace(/~1/g, '/').replace(/~0/g, '~'));
  const get = (n: unknown, k: string): unknown => (n && typeof n === 'object' ? (n as Record<string, unknown>)[k] : undefined);
  let node: unknown = root;
  let words: string | undefined;
  for (let j = 0; j < segs.length; j++) {
    const k = segs[j];
    // Keywords followed by a name or an index, and those that step into another value than the one failing.
    const twoSegments = ['properties', 'patternProperties', 'prefixItems', 'anyOf', 'allOf', 'oneOf'].includes(k);
    const anotherValue = ['properties', 'patternProperties', 'prefixItems', 'items', 'additionalProperties', 'propertyNames', 'contains'].includes(k);
    node = twoSegments ? get(get(node, k), segs[++j] ?? '') : get(node, k);
    if (anotherValue) words = undefined;
    const w = get(node, 'x-expect');
    if (words === undefined && typeof w === 'string') words = w;
  }
  return words;
}

/**
 * The message of a failed validation. A type error keeps its own words when
 * no alternative accepted the type; a length error of the rule itself keeps
 * its numbers; otherwise an error inside a rule built with words (`x-expect`:
 * a format of an anyOf, a pattern, a `not`) says the outermost rule's words:
 * "argument 'gateway' must be an IPv4 or IPv6 address, or empty".
 */
function describeErrors(errors: ErrorObject[], root: JsonSchema): string {
  const first = errors[0];
  if (!first) return describe(undefined);
  const name = argName(first.instancePath);
  const here = errors.filter((e) => e.instancePath === first.instancePath);
  if (here.every((e) => e.keyword === 'type' || e.keyword === 'anyOf')) {
    const types = [...new Set(here.filter((e) => e.keyword === 'type').flatMap((e) => String((e.params as { type: string }).type).split(',')))];
    if (types.length) return `argument '${name}' must be ${types.join(' or ')}`;
  }
  if (LENGTH_KEYWORDS.has(first.keyword) && typeof (first.parentSchema as JsonSchema | undefined)?.['x-expect'] === 'string') return describe(first);
  const words = ruleWords(root, first.schemaPath);
  if (words) return `argument '${name}' must be ${words}`;
  return describe(first);
}

function argName(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((p) => p.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((acc, p) => (/^\d+$/.test(p) ? `${acc}[${p}]` : acc ? `${acc}.${p}` : p), '');
}

function describe(e: ErrorObject | undefined): string {
  if (!e) return 'arguments do not fit the schema';
  const name = argName(e.instancePath);
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return name ? `argument '${name}' is missing required field '${p.missingProperty}'` : `missing required argument '${p.missingProperty}'`;
    case 'additionalProperties':
      return name ? `argument '${name}' has unknown field '${p.additionalProperty}'` : `unknown argument '${p.additionalProperty}'`;
    case 'type':
      return `argument '${name}' must be ${String(p.type).split(',').join(' or ')}`;
    case 'minimum':
      return `argument '${name}' must be >= ${p.limit}`;
    case 'maximum':
      return `argument '${name}' must be <= ${p.limit}`;
    case 'enum':
      return `argument '${name}' must be one of: ${(p.allowedValues as unknown[]).map((x) => (x === '' ? "''" : String(x))).join(', ')}`;
    case 'format':
      return p.format === 'date-time' ? `argument '${name}' must be an RFC 3339 date-time` : `argument '${name}' must be a valid ${p.format}`;
    case 'maxLength':
      return `argument '${name}' must be at most ${p.limit} character${p.limit === 1 ? '' : 's'}`;
    case 'minLength':
      return p.limit === 1 ? `argument '${name}' must not be empty` : `argument '${name}' must be at least ${p.limit} characters`;
    case 'propertyNames':
      return `argument '${name}' has an invalid key '${p.propertyName}'`;
    case 'maxItems':
      return `argument '${name}' takes at most ${p.limit} item${p.limit === 1 ? '' : 's'}`;
    case 'pattern':
      return `argument '${name}' has an invalid form`;
    default:
      return `argument '${name || '(root)'}' ${e.message ?? 'does not fit the schema'}`;
  }
}

/**
 * Query strings and path segments carry text; turn each value into what the
 * schema expects where the text unambiguously says so, and leave it otherwise
 * so that validation reports the type error. Objects and arrays come as JSON.
 */
export function coerceText(schema: JsonSchema | undefined, raw: string, name: string): unknown {
  if (!schema) return raw;
  const types = schemaTypes(schema);
  if (types.has('string')) return raw;
  if (types.has('null') && raw === 'null') return null;
  if ((types.has('integer') || types.has('number')) && /^-?\d+(\.\d+)?([eE][+-]?\d+)?$/.test(raw)) return Number(raw);
  if (types.has('boolean') && (raw === 'true' || raw === 'false')) return raw === 'true';
  if ((types.has('object') || types.has('array')) && /^\s*[[{]/.test(raw)) {
    try {
      return JSON.parse(raw);
    } catch {
      throw badRequest(`argument '${name}' must be JSON text for an object or array`);
    }
  }
  return raw;
}

/** Every JSON type a schema admits (from `type` and `anyOf`/`oneOf`). */
export function schemaTypes(schema: JsonSchema): Set<string> {
  const out = new Set<string>();
  const t = schema.type;
  if (typeof t === 'string') out.add(t);
  else if (Array.isArray(t)) for (const x of t) out.add(String(x));
  for (const k of ['anyOf', 'oneOf'] as const) {
    const alts = schema[k];
    if (Array.isArray(alts)) for (const a of alts) for (const x of schemaTypes(a as JsonSchema)) out.add(x);
  }
  return out;
}
