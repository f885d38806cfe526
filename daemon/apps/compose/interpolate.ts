/**
 * Compose variable interpolation, done by hostd rather than by compose: hostd
 * checks the file after interpolation and then hands compose a rendering in
 * which every `$` is escaped, so compose substitutes nothing and runs exactly
 * what was checked. The syntax is compose's: `$$`, `$NAME`, `${NAME}`,
 * `${NAME:-default}`, `${NAME-default}`, `${NAME:?message}`, `${NAME?message}`,
 * `${NAME:+alt}`, `${NAME+alt}`, with nesting inside the default/alt part.
 *
 * The environment is hostd's (the app's built-in variables and a template's
 * parameters), never the daemon's own: a variable that is not set and has no
 * default is refused rather than silently replaced by an empty string.
 */
import { badRequest } from '../../lib/errors.js';

const NAME = /^[_A-Za-z][_A-Za-z0-9]*/;

export type Env = Readonly<Record<string, string>>;

/**
 * How an env file is read (compose's dotenv rules): a variable that is not set
 * is empty, and a `$` that starts no reference is kept as it is.
 */
export interface Leniency {
  unsetIsEmpty: boolean;
  strayDollar: boolean;
}

const STRICT: Leniency = { unsetIsEmpty: false, strayDollar: false };

class Scanner {
  i = 0;
  constructor(
    readonly s: string,
    readonly mode: Leniency,
  ) {}
}

/** Interpolates one string; `where` names it in errors (e.g. `compose_content: services.web.image`). */
export function interpolateString(s: string, env: Env, where: string, mode: Leniency = STRICT): string {
  if (!s.includes('$')) return s;
  const sc = new Scanner(s, mode);
  const out = readUntil(sc, env, where, null);
  return out;
}

/** Reads text up to `stop` (a closing brace at depth 0) or the end; returns the substituted text. */
function readUntil(sc: Scanner, env: Env, where: string, stop: '}' | null): string {
  let out = '';
  while (sc.i < sc.s.length) {
    const c = sc.s[sc.i];
    if (stop && c === stop) return out;
    if (c !== '$') {
      out += c;
      sc.i++;
      continue;
    }
    const next = sc.s[sc.i + 1];
    if (next === '$') {
      out += '$';
      sc.i += 2;
      continue;
    }
    if (next === '{') {
      sc.i += 2;
      out += braced(sc, env, where);
      continue;
    }
    const m = NAME.exec(sc.s.slice(sc.i + 1));
    if (!m && sc.mode.strayDollar) {
      out += '$';
      sc.i++;
      continue;
    }
    // The value is not quoted: it may be a password.
    if (!m) throw badRequest(`${where}: invalid interpolation: a $ not followed by a variable name or { (write $$ for a literal $)`);
    sc.i += 1 + m[0].length;
    out += lookup(env, m[0], where, sc.mode);
  }
  if (stop) throw badRequest(`${where}: unterminated \${ in interpolation`);
  return out;
}

function lookup(env: Env, name: string, where: string, mode: Leniency): string {
  const v = env[name];
  if (v === undefined && mode.unsetIsEmpty) return '';
  if (v === undefined) {
    throw badRequest(
      `${where}: variable '${name}' is not set (hostd interpolates with the app's own variables only; give a default with \${${name}:-value} or write the value)`,
    );
  }
  return v;
}

function braced(sc: Scanner, env: Env, where: string): string {
  const m = NAME.exec(sc.s.slice(sc.i));
  if (!m) throw badRequest(`${where}: invalid interpolation: \${ must be followed by a variable name`);
  const name = m[0];
  sc.i += name.length;
  const rest = sc.s.slice(sc.i);
  if (rest.startsWith('}')) {
    sc.i++;
    return lookup(env, name, where, sc.mode);
  }
  const op = /^(:-|-|:\?|\?|:\+|\+)/.exec(rest)?.[0];
  if (!op) throw badRequest(`${where}: invalid interpolation after \${${name}`);
  sc.i += op.length;
  const arg = readUntil(sc, env, where, '}');
  sc.i++; // the closing brace
  const v = env[name];
  const set = v !== undefined;
  const nonEmpty = set && v !== '';
  switch (op) {
    case ':-':
      return nonEmpty ? v! : arg;
    case '-':
      return set ? v! : arg;
    case ':?':
      if (!nonEmpty) throw badRequest(`${where}: required variable '${name}' is missing${arg ? `: ${arg}` : ''}`);
      return v!;
    case '?':
      if (!set) throw badRequest(`${where}: required variable '${name}' is missing${arg ? `: ${arg}` : ''}`);
      return v!;
    case ':+':
      return nonEmpty ? arg : '';
    default: // '+'
      return set ? arg : '';
  }
}

/** Interpolates every string value of a parsed document (keys are left as they are, as compose does). */
export function interpolateTree(value: unknown, env: Env, where: string): unknown {
  if (typeof value === 'string') return interpolateString(value, env, where);
  if (Array.isArray(value)) return value.map((v, i) => interpolateTree(v, env, `${where}[${i}]`));
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = interpolateTree(v, env, childPath(where, k));
    return out;
  }
  return value;
}

/** `a.b` below `a`; right after a label ending in ':' (`compose_content:`), `compose_content: b`. */
export function childPath(where: string, key: string): string {
  return where.endsWith(':') ? `${where} ${key}` : `${where}.${key}`;
}

/** Escapes every `$` of every string value so that compose's own interpolation leaves it as it is. */
export function escapeTree(value: unknown): unknown {
  if (typeof value === 'string') return value.replace(/\$/g, '$$$$');
  if (Array.isArray(value)) return value.map(escapeTree);
  if (value && typeof value === 'object') {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = escapeTree(v);
    return out;
  }
  return value;
}
