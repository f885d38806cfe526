/**
 * Caddy placeholders in strings a token gives (header_up values), and the
 * escaping of strings hostd means literally.
 *
 * Caddy expands `{key}` in many configuration fields at load or request
 * time, and its global keys reach the host: `{env.*}` (Caddy's environment),
 * `{system.*}` (host name, working directory), `{time.*}`, and since 2.7
 * `{file.*}` (any file, read as Caddy's user: root). Only the request's own
 * values are allowed in a header a token sets (`{http.request.*}`), without
 * `{http.request.body*}`, which makes Caddy read a whole request body into
 * memory.
 *
 * The scan mirrors Caddy's replacer (replacer.go, the same from 2.4 to 2.10):
 * a brace preceded by a backslash is escaped (the backslash is dropped, the
 * brace kept); an unescaped `{` runs to the first `}` not preceded by a
 * backslash, and what lies between is the key. It is stricter than Caddy in
 * one way on purpose: every unescaped `{` must open an allowed placeholder.
 * Caddy's `ReplaceKnown` (request headers and static response bodies; the
 * header case measured on 2.6.2 in test/runtime/proxy/caddy-placeholders)
 * leaves an unknown `{...}` in place and rescans from just after its brace,
 * so `{x{env.HOME}}` sends the inner one expanded; refusing any `{` that
 * does not open an allowed key closes that whatever the Caddy version.
 */

/** Keys a header value may use: the request's own values. */
const ALLOWED = /^http\.request\.[A-Za-z0-9_.\-/,:]+$/;
/** Reads the whole request body into Caddy's memory (no bound in 2.6 to 2.10). */
const BODY = /^http\.request\.body/;

/** Caddyfile shorthands: the Caddyfile adapter rewrites them; in JSON they are sent as written. */
const SHORTHANDS: Record<string, string> = {
  host: 'http.request.host',
  hostport: 'http.request.hostport',
  port: 'http.request.port',
  method: 'http.request.method',
  scheme: 'http.request.scheme',
  uri: 'http.request.uri',
  path: 'http.request.uri.path',
  query: 'http.request.uri.query',
  remote: 'http.request.remote',
  remote_host: 'http.request.remote.host',
  remote_port: 'http.request.remote.port',
  client_ip: 'http.request.remote.host',
};

/** The placeholders of `value` as Caddy's replacer finds them (keys; escaped braces skipped). */
export function placeholderKeys(value: string): Array<{ key: string; closed: boolean }> {
  const out: Array<{ key: string; closed: boolean }> = [];
  for (let i = 0; i < value.length; i++) {
    if (value[i] !== '{' || (i > 0 && value[i - 1] === '\\')) continue;
    let end = value.indexOf('}', i);
    while (end > 0 && end < value.length - 1 && value[end - 1] === '\\') {
      const next = value.indexOf('}', end + 1);
      if (next < 0) {
        end = -1;
        break;
      }
      end = next;
    }
    if (end < 0) out.push({ key: value.slice(i + 1), closed: false });
    else out.push({ key: value.slice(i + 1, end), closed: true });
    // The next `{` is looked at too, even inside this one: see the note on ReplaceKnown above.
  }
  return out;
}

/**
 * Why `value` may not go to Caddy as a header value, or null. The message
 * names the placeholder and the rule.
 */
export function placeholderProblem(value: string): string | null {
  for (const p of placeholderKeys(value)) {
    const shown = p.closed ? `{${p.key}}` : `{${p.key}`;
    if (!p.closed) return `'{' opens no placeholder (write \\{ for a literal brace)`;
    if (/[{}\\]/.test(p.key)) return `placeholder ${shown} is refused: placeholders do not nest (write \\{ for a literal brace)`;
    if (SHORTHANDS[p.key])
      return `placeholder ${shown} is refused: it is a Caddyfile shorthand, which Caddy sends as written from its JSON configuration; use {${SHORTHANDS[p.key]}}`;
    if (BODY.test(p.key)) return `placeholder ${shown} is refused: it makes Caddy read the whole request body into memory`;
    if (!ALLOWED.test(p.key)) return `placeholder ${shown} is refused: only the request's placeholders ({http.request.*}) are allowed`;
  }
  return null;
}

/**
 * `s` escaped for a field Caddy expands, so that it arrives as written.
 * Caddy drops one backslash before each brace, so a backslash already in
 * front of a brace survives (`a\{` is sent as `a\\{` and read back as `a\{`).
 */
export function caddyLiteral(s: string): string {
  return s.replace(/[{}]/g, '\\$&');
}

/** Whether `s` holds a brace, which a field Caddy may expand must not (names, addresses, URLs, credentials). */
export const hasBrace = (s: string): boolean => /[{}]/.test(s);
