/**
 * Env files (`env_file:`), read by hostd rather than by compose. Compose
 * resolves a name without a value, and every `${VAR}` in a value, from its
 * own environment, which is hostd's (the engine address, DOCKER_CONFIG,
 * HOME, PATH): with compose reading the file, an app could copy them into
 * its containers. So hostd parses the file with compose's dotenv rules and
 * hands compose plain `environment` entries (escaped like the rest of the
 * rendering).
 *
 * The rules (compose 2.x): blank lines and `#` comments are skipped; an
 * optional `export ` prefix; `KEY=VALUE` or `KEY: VALUE`; a key alone is
 * left unset (compose would take it from its environment; hostd has none to
 * give). Unquoted values end at the line's end or at ` #`, trailing blanks
 * trimmed. "Double-quoted" values may span lines and take `\n`, `\r`, `\"`,
 * `\\` and `\$`. 'Single-quoted' values are literal. Unquoted and
 * double-quoted values are interpolated with the variables defined above in
 * the file and the app's own (HOSTD_APP_ID ...); an unknown one is empty and a
 * `$` that starts no reference stays, as compose does.
 */
import { badRequest } from '../../lib/errors.js';
import { interpolateString, type Env } from './interpolate.js';

const KEY_CHAR = /[A-Za-z0-9_.]/;
const BLANK = (c: string | undefined) => c === ' ' || c === '\t' || c === '\r' || c === '\f' || c === '\v';

/** The variables of one env file, in order; `where` names the file in errors (never a value: it may be a password). */
export function parseEnvFile(text: string, appEnv: Env, where: string): Map<string, string> {
  const out = new Map<string, string>();
  let i = 0;
  const line = () => text.slice(0, i).split('\n').length;
  const lookupEnv = () => ({ ...appEnv, ...Object.fromEntries(out) });
  while (i < text.length) {
    // Statement start: skip blanks and newlines, and comment lines.
    while (i < text.length && (BLANK(text[i]) || text[i] === '\n')) i++;
    if (i >= text.length) break;
    if (text[i] === '#') {
      while (i < text.length && text[i] !== '\n') i++;
      continue;
    }
    if (text.startsWith('export', i) && BLANK(text[i + 6])) {
      i += 6;
      while (BLANK(text[i])) i++;
    }
    const at = line();
    let key = '';
    let sep: string | null = null;
    while (i < text.length) {
      const c = text[i];
      if (c === '=' || c === ':') {
        sep = c;
        i++;
        break;
      }
      if (c === '\n') break;
      if (BLANK(c)) {
        i++;
        continue;
      }
      if (!KEY_CHAR.test(c))
        throw badRequest(`${where}: line ${at}: unexpected character '${c === "'" || c === '"' ? c : c.replace(/[^\x20-\x7e]/g, '?')}' in a variable name`);
      key += c;
      i++;
    }
    if (!key) throw badRequest(`${where}: line ${at}: a variable name is missing`);
    if (sep === null) continue; // a key alone: left unset
    while (BLANK(text[i])) i++;
    const q = text[i];
    let value: string;
    if (q === '"' || q === "'") {
      let j = i + 1;
      while (j < text.length && !(text[j] === q && text[j - 1] !== '\\')) j++;
      if (j >= text.length) throw badRequest(`${where}: line ${at}: the quoted value of '${key}' is not terminated`);
      const raw = text.slice(i + 1, j);
      value = q === "'" ? raw : interpolate(unescapeValue(raw), lookupEnv(), `${where}: line ${at}`);
      i = j + 1;
      while (i < text.length && text[i] !== '\n') i++; // a comment after the closing quote
    } else {
      let j = i;
      while (j < text.length && text[j] !== '\n') j++;
      let raw = text.slice(i, j);
      const hash = raw.search(/[ \t]#/);
      if (hash >= 0) raw = raw.slice(0, hash);
      raw = raw.replace(/[ \t\r\f\v]+$/, '');
      value = interpolate(raw, lookupEnv(), `${where}: line ${at}`);
      i = j;
    }
    out.set(key, value);
  }
  return out;
}

/** `\$` stays an escaped dollar through interpolation ($$); the other escapes of a double-quoted value. */
function unescapeValue(s: string): string {
  return s.replace(/\\(.)/gs, (_m, c: string) => (c === 'n' ? '\n' : c === 'r' ? '\r' : c === '$' ? '$$' : c));
}

function interpolate(s: string, env: Env, where: string): string {
  return interpolateString(s, env, where, { unsetIsEmpty: true, strayDollar: true });
}
