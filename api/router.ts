/**
 * Maps a method and a path under /api/v1 to an operation, derived from the
 * registry. Literal segments beat parameters; `*sub_path` parameters take one
 * or more segments. A path that some operation matches with another method
 * gives 405 with the methods that would work.
 */
import type { Method, Operation } from './registry/types.js';
import { isGreedyParam } from './registry/index.js';
import { badRequest, methodNotAllowed, notFound } from '../daemon/lib/errors.js';

export interface RouteMatch {
  op: Operation;
  /** Decoded path parameter values. */
  params: Record<string, string>;
}

interface Candidate { op: Operation; params: Record<string, string>; literals: number }

export class Router {
  /** Operations indexed by their first path segment (the collection). */
  private readonly byHead = new Map<string, Operation[]>();
  /**
   * Paths without parameters, by exact text then method. Such a route has
   * only literal segments, so when the method matches it beats any route
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
        byMethod.set(op.method, Object.freeze({ op, params: Object.freeze({}) as Record<string, string> }));
        this.statics.set(op.path, byMethod);
      }
    }
  }

  /** `rawPath` is the part after /api/v1, still percent-encoded. */
  match(method: string, rawPath: string): RouteMatch {
    const hit = this.statics.get(rawPath)?.get(method);
    if (hit) return { op: hit.op, params: {} };
    const rawSegs = rawPath.split('/').filter(Boolean);
    const segs: string[] = [];
    for (const s of rawSegs) {
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
      if (matchSegs(op.segments, 0, segs, rawSegs, 0, params)) {
        found.push({ op, params, literals: op.segments.filter((s) => !s.startsWith('{')).length });
      }
    }
    if (!found.length) throw notFound(`no endpoint at /api/v1${rawPath}`);
    // A segment that cannot be an integer id (`/vms/images`) is matched by an
    // integer parameter (`/vms/{id}`) only when no template fits it otherwise,
    // so that `PATCH /vms/images` is 405 rather than a bad `id`, and the Allow
    // header lists only what the path offers; `GET /vms/abc` is still 400.
    const strong = found.filter((c) => integerParamsFit(c));
    if (strong.length) found = strong;
    const same = found.filter((c) => c.op.method === (method as Method));
    if (!same.length) {
      const allow = [...new Set(found.map((c) => c.op.method))];
      throw methodNotAllowed(`method ${method} is not allowed here; allowed: ${allow.join(', ')}`, allow);
    }
    same.sort((a, b) => b.literals - a.literals);
    const best = same[0];
    for (const [name, value] of Object.entries(best.params)) {
      if (isGreedyParam(name) && /%(2f|5c)/i.test(value)) {
        throw badRequest(`argument '${name}' must not contain encoded path separators`);
      }
    }
    const params: Record<string, string> = {};
    for (const [name, value] of Object.entries(best.params)) params[name] = isGreedyParam(name) ? decodeGreedy(value) : value;
    return { op: best.op, params };
  }
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

/**
 * Greedy parameters are matched on their raw text (so that encoded separators
 * can be refused) and decoded here; others are matched decoded.
 */
function matchSegs(tpl: string[], ti: number, segs: string[], raw: string[], si: number, params: Record<string, string>): boolean {
  if (ti === tpl.length) return si === segs.length;
  const t = tpl[ti];
  if (!t.startsWith('{')) {
    return si < segs.length && segs[si] === t && matchSegs(tpl, ti + 1, segs, raw, si + 1, params);
  }
  const name = t.slice(1, -1);
  if (!isGreedyParam(name)) {
    if (si >= segs.length || segs[si] === '') return false;
    params[name] = segs[si];
    if (matchSegs(tpl, ti + 1, segs, raw, si + 1, params)) return true;
    delete params[name];
    return false;
  }
  const restLiterals = tpl.length - ti - 1;
  for (let end = segs.length - restLiterals; end > si; end--) {
    params[name] = raw.slice(si, end).join('/');
    if (matchSegs(tpl, ti + 1, segs, raw, end, params)) return true;
  }
  delete params[name];
  return false;
}

function decodeGreedy(raw: string): string {
  return raw.split('/').map((s) => decodeURIComponent(s)).join('/');
}
