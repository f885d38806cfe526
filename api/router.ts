/**
 * Maps a method and a path under /api/v1 to an operation, derived from the
 * registry.
 *
 * A concrete path is first resolved to a resource: the templates that match
 * it and that no other matching template beats. Comparing two templates
 * segment by segment, a literal beats a parameter at the first position where
 * one has a literal and the other a parameter (as OpenAPI says concrete paths
 * match before templated ones), so `/apps/discovered` is its own resource and
 * does not borrow the methods of `/apps/{app_id}`. Segments inside a
 * multi-segment parameter after its first are not compared: for
 * `/folders/F/entries/a/b/copy` the copy endpoint and the move and delete of
 * the entry `a/b/copy` stay one resource, told apart by the method.
 *
 * The resource's methods are the answer to OPTIONS and the Allow header of a
 * 405; HEAD is served wherever GET is. `*sub_path` parameters take one or
 * more segments, each percent-decoded, so `a%2Fb` and `a/b` are the same
 * value. An integer parameter takes a non-integer segment only when no
 * template fits the path otherwise (`GET /vms/abc` is `/vms/{id}` with a bad
 * id, 400; `/vms/images/start` is never `/vms/{id}/start`).
 */
import type { Method, Operation } from './registry/types.js';
import { isGreedyParam } from './registry/index.js';
import { badRequest, methodNotAllowed, notFound } from '../daemon/lib/errors.js';

export interface RouteMatch {
  op: Operation;
  /** Decoded path parameter values. */
  params: Record<string, string>;
}

/** How a template segment took a concrete segment. */
const LITERAL = 2;
const PARAM = 1;
/** A later segment of a multi-segment parameter: not compared. */
const INSIDE = 0;

interface Candidate {
  op: Operation;
  params: Record<string, string>;
  /** One rank per concrete segment. */
  ranks: number[];
}

/** The order methods are listed in Allow headers. */
const ORDER = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS'];

/** The Allow header value for the registry methods of one resource. */
export function allowHeader(methods: Iterable<string>): string {
  const set = new Set(methods);
  if (set.has('GET')) set.add('HEAD');
  set.add('OPTIONS');
  return ORDER.filter((m) => set.has(m)).join(', ');
}

export class Router {
  /** Operations indexed by their first path segment (the collection). */
  private readonly byHead = new Map<string, Operation[]>();
  /**
   * Paths without parameters, by exact text then method (HEAD with GET's
   * operation). Such a route has only literal segments, so it beats any route
   * with parameters: the lookup is the whole answer (the hot path).
   */
  private readonly statics = new Map<string, Map<string, RouteMatch>>();

  constructor(ops: readonly Operation[]) {
    for (const op of ops) {
      const head = op.segments[0];
      const list = this.byHead.get(head) ?? [];
      list.push(op);
      this.byHead.set(head, list);
      if (Object.keys(op.params).length === 0) {
        const byMethod = this.statics.get(op.path) ?? new Map<string, RouteMatch>();
        const hit = Object.freeze({ op, params: Object.freeze({}) as Record<string, string> });
        byMethod.set(op.method, hit);
        if (op.method === 'GET') byMethod.set('HEAD', hit);
        this.statics.set(op.path, byMethod);
      }
    }
  }

  /**
   * The operation for a method (HEAD as GET) and a path after /api/v1, still
   * percent-encoded. Throws 404 for a path no operation has, 405 with Allow
   * for a method its resource lacks (OPTIONS included: see `allow`).
   */
  match(method: string, rawPath: string): RouteMatch {
    const hit = this.statics.get(rawPath)?.get(method);
    if (hit) return { op: hit.op, params: {} };
    const resource = this.resolve(rawPath);
    const want = method === 'HEAD' ? 'GET' : method;
    const best = resource.find((c) => c.op.method === (want as Method));
    if (!best) {
      const allow = allowHeader(resource.map((c) => c.op.method));
      throw methodNotAllowed(`method ${method} is not allowed here; allowed: ${allow}`, allow.split(', '));
    }
    return { op: best.op, params: best.params };
  }

  /** The Allow header value of a path (OPTIONS); 404 when no operation has it. */
  allow(rawPath: string): string {
    return allowHeader(this.resolve(rawPath).map((c) => c.op.method));
  }

  /** The candidates of the path's resource (one per method); 404 when none. */
  private resolve(rawPath: string): Candidate[] {
    const segs: string[] = [];
    for (const s of rawPath.split('/')) {
      if (!s) continue;
      try {
        segs.push(s.includes('%') ? decodeURIComponent(s) : s);
      } catch {
        throw badRequest('the path has malformed percent-encoding');
      }
    }
    const ops = this.byHead.get(segs[0] ?? '') ?? [];
    let found: Candidate[] = [];
    for (const op of ops) {
      const params: Record<string, string> = {};
      const ranks: number[] = [];
      if (matchSegs(op.segments, 0, segs, 0, params, ranks)) found.push({ op, params, ranks });
    }
    if (!found.length) throw notFound(`no endpoint at /api/v1${rawPath}`);
    const strong = found.filter((c) => integerParamsFit(c));
    if (strong.length) found = strong;
    return found.filter((c) => !found.some((o) => o !== c && beats(o, c)));
  }
}

/** Whether `a` is more specific than `b`: at the first compared segment where they differ, `a` has the literal. */
function beats(a: Candidate, b: Candidate): boolean {
  for (let i = 0; i < a.ranks.length; i++) {
    const x = a.ranks[i];
    const y = b.ranks[i];
    if (x === INSIDE || y === INSIDE || x === y) continue;
    return x > y;
  }
  return false;
}

const INTEGER_TEXT = /^-?\d+$/;

function integerParamsFit(c: Candidate): boolean {
  for (const [name, value] of Object.entries(c.params)) {
    const t = c.op.params[name]?.type;
    const isInt = t === 'integer' || (Array.isArray(t) && t.includes('integer') && !t.includes('string'));
    if (isInt && !INTEGER_TEXT.test(value)) return false;
  }
  return true;
}

/** Matches decoded segments; a greedy parameter takes the longest run that lets the rest match. */
function matchSegs(tpl: string[], ti: number, segs: string[], si: number, params: Record<string, string>, ranks: number[]): boolean {
  if (ti === tpl.length) return si === segs.length;
  const t = tpl[ti];
  if (!t.startsWith('{')) {
    if (si >= segs.length || segs[si] !== t) return false;
    ranks[si] = LITERAL;
    return matchSegs(tpl, ti + 1, segs, si + 1, params, ranks);
  }
  const name = t.slice(1, -1);
  if (!isGreedyParam(name)) {
    if (si >= segs.length) return false;
    params[name] = segs[si];
    ranks[si] = PARAM;
    if (matchSegs(tpl, ti + 1, segs, si + 1, params, ranks)) return true;
    delete params[name];
    return false;
  }
  const restLiterals = tpl.length - ti - 1;
  for (let end = segs.length - restLiterals; end > si; end--) {
    params[name] = segs.slice(si, end).join('/');
    ranks[si] = PARAM;
    for (let k = si + 1; k < end; k++) ranks[k] = INSIDE;
    if (matchSegs(tpl, ti + 1, segs, end, params, ranks)) return true;
  }
  delete params[name];
  return false;
}
