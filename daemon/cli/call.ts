/**
 * Turns an operation name and its arguments into a request, from the registry
 * alone: the path with its parameters filled, the rest in the query string
 * (GET/DELETE, objects as JSON text) or the JSON body.
 */
import type { Operation, JsonSchema } from '../../api/registry/types.js';
import { getOperation, isGreedyParam } from '../../api/registry/index.js';
import type { AdminClient, Reply } from './client.js';
import { API_PREFIX } from '../../api/catalog.js';

export interface BuiltRequest {
  method: string;
  path: string;
  body?: Record<string, unknown>;
}

export function buildRequest(op: Operation, args: Record<string, unknown>): BuiltRequest {
  const rest = { ...args };
  const path = op.segments
    .map((seg) => {
      if (!seg.startsWith('{')) return seg;
      const name = seg.slice(1, -1);
      const v = rest[name];
      if (v === undefined) throw new Error(`missing path argument '${name}' for ${op.name}`);
      delete rest[name];
      const text = String(v);
      return isGreedyParam(name) ? text.split('/').map(encodeURIComponent).join('/') : encodeURIComponent(text);
    })
    .join('/');
  const full = `${API_PREFIX}/${path}`;
  if (op.method === 'GET' || op.method === 'DELETE') {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(rest)) {
      if (v === undefined) continue;
      q.set(k, typeof v === 'object' && v !== null ? JSON.stringify(v) : String(v));
    }
    const qs = q.toString();
    return { method: op.method, path: qs ? `${full}?${qs}` : full };
  }
  return { method: op.method, path: full, body: rest };
}

/** Parses `key=value` words: a value is taken as JSON when it parses and the schema does not want a string. */
export function parseKeyValues(op: Operation, words: string[]): Record<string, unknown> {
  const props = (op.schema.properties ?? {}) as Record<string, JsonSchema>;
  const out: Record<string, unknown> = {};
  for (const w of words) {
    const eq = w.indexOf('=');
    if (eq <= 0) throw new Error(`expected key=value, got '${w}'`);
    const key = w.slice(0, eq);
    const raw = w.slice(eq + 1);
    const t = props[key]?.type;
    const wantsString = t === 'string' || (Array.isArray(t) && t.length === 2 && t.includes('string') && t.includes('null') && raw !== 'null');
    if (wantsString) out[key] = raw;
    else {
      try {
        out[key] = JSON.parse(raw);
      } catch {
        out[key] = raw;
      }
    }
  }
  return out;
}

/** Runs one registry operation through hostctl's client (the admin socket serves the API as the administrator). */
export function callOperation(client: AdminClient, name: string, args: Record<string, unknown>): Promise<Reply> {
  const op = getOperation(name);
  if (!op) throw new Error(`unknown operation '${name}'`);
  const req = buildRequest(op, args);
  return client.request(req.method, req.path, req.body);
}
