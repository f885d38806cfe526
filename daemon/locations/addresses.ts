/**
 * Share addresses and credentials as the locations domain accepts them: the
 * rules the registry's schema cannot state with a message that names what is
 * wrong (the share, user and domain name rule; the split of `DOMAIN\user`),
 * the same rule held against stored records, and the text forms a location
 * is shown in. Pure: no I/O, unit-tested.
 *
 * What the schema states (api/registry/locations.ts) is checked before any
 * of this runs: `username` and `password` are strings without control
 * characters, of at most 256 and 1024 characters.
 */
import { badRequest } from '../lib/errors.js';
import type { Credentials, MaybeCredentials, Remote } from './driver.js';

// A DNS name or NetBIOS name (letters, digits, '.', '-', '_'), or an IPv4 address.
// The registry's `smbHost()` states the same rule for discovery's `host`.
const HOST = /^[A-Za-z0-9_]([A-Za-z0-9_.-]{0,251}[A-Za-z0-9_])?$/;
/**
 * Characters refused in share names, user names and domains: Windows' own
 * reserved ones (\ / : * ? " < > | and, for names, [ ] + ; =), and those the
 * programs hostd hands them to read as syntax:
 * - `,` and `=`: mount.cifs copies the share (`unc=`), the user (`user=`) and
 *   the domain (`domain=`) into the kernel's comma-separated option string,
 *   so `s,uid=0,noperm` would add mount options;
 * - `%`: smbclient splits `-U user%password`, and libsmbclient (smbnetfs)
 *   decodes `%XX` in the smb:// paths it builds from the share name;
 * - `@`, `;` and `:`: the user, domain and password separators of smb:// URLs
 *   and of smbnetfs's `domain:user:password@computer` path names;
 * - control characters: every credentials and config format is line based.
 */
const NAME_BAD = /[\\/:*?"<>|[\]+;=,%@\u0000-\u001f\u007f]/;
const CONTROL = /[\u0000-\u001f\u007f]/;
const CONTROLS = /[\u0000-\u001f\u007f]/g;

/** What share, user and domain names may be, for messages. */
export const nameRule = (max: number) =>
  `1-${max} characters without \\ / : * ? " < > | [ ] + ; = , % @ or control characters, not starting with '-' and without a space at either end`;

/** Why `name` cannot be a share, user or domain name (`it holds ','`), or null. Never quotes the name: the caller decides. */
function nameProblem(name: string, max: number): string | null {
  if (name.length === 0) return 'it is empty';
  if (name.length > max) return `it is over ${max} characters`;
  const bad = NAME_BAD.exec(name);
  if (bad) return CONTROL.test(bad[0]) ? 'it holds a control character' : `it holds '${bad[0]}'`;
  if (/^\s|\s$/.test(name)) return 'it has a space at one end';
  // Taken for an option by the programs that get it as an argument.
  if (name.startsWith('-')) return "it starts with '-'";
  return null;
}

const validHost = (host: string) => HOST.test(host) && !host.includes('..');

/**
 * The rule a stored share address must still pass (records made before it
 * existed may not): null, or a message naming what is refused. User and
 * domain are not secret; the password is never looked at here.
 */
export function remoteRuleProblem(host: string, share: string, user: string | null, domain: string | null): string | null {
  if (!validHost(host)) return `host name '${host.slice(0, 64).replace(CONTROLS, '?')}' is refused (a DNS or NetBIOS name, or an IPv4 address)`;
  const sp = share === '.' || share === '..' ? `it is '${share}'` : nameProblem(share, 80);
  if (sp) return `share name '${share.slice(0, 80).replace(CONTROLS, '?')}' is refused (${sp}; share names are ${nameRule(80)})`;
  const up = user === null ? null : nameProblem(user, 256);
  if (up) return `user name '${user!.slice(0, 64).replace(CONTROLS, '?')}' is refused (${up}; user names are ${nameRule(256)})`;
  const dp = domain === null ? null : nameProblem(domain, 256);
  if (dp) return `domain '${domain!.slice(0, 64).replace(CONTROLS, '?')}' is refused (${dp}; domains are ${nameRule(256)})`;
  return null;
}

/**
 * The 409 of a stored location whose address the rule refuses now (made by
 * an older version), or null: such a location is kept but never mounted again.
 */
export function refusal(r: { name: string; host: string; share: string; user: string | null; domain: string | null }): string | null {
  const problem = remoteRuleProblem(r.host, r.share, r.user, r.domain);
  if (!problem) return null;
  return `location '${r.name}' is refused: its stored address breaks a rule added since it was created (${problem}); it is not mounted again, and nothing was removed: delete it and add the share again`;
}

/** `//host/share` or `host/share` (one trailing '/' tolerated); 400 naming `remote` otherwise. */
export function parseRemote(input: unknown, arg = 'remote'): Remote {
  if (typeof input !== 'string' || input.trim() === '')
    throw badRequest(`argument '${arg}' must be a share address of the form //<host>/<share> or <host>/<share>`);
  let s = input.trim();
  if (s.startsWith('\\\\')) s = '//' + s.slice(2).replace(/\\/g, '/');
  if (s.startsWith('smb://')) s = s.slice('smb:'.length);
  if (s.startsWith('//')) s = s.slice(2);
  else if (s.startsWith('/')) throw badRequest(`argument '${arg}' must be //<host>/<share> or <host>/<share>, not a local path`);
  if (s.endsWith('/')) s = s.slice(0, -1);
  const parts = s.split('/');
  if (parts.length !== 2 || !parts[0] || !parts[1]) {
    throw badRequest(`argument '${arg}' must be //<host>/<share> or <host>/<share> (exactly one host and one share name)`);
  }
  const [host, share] = parts;
  if (!validHost(host)) throw badRequest(`argument '${arg}' has an invalid host name '${host.slice(0, 64)}' (a DNS or NetBIOS name, or an IPv4 address)`);
  const problem = share === '.' || share === '..' ? `it is '${share}'` : nameProblem(share, 80);
  if (problem) throw badRequest(`argument '${arg}' has an invalid share name (${problem}; share names are ${nameRule(80)})`);
  return { host, share };
}

export const remoteText = (r: Remote): string => `//${r.host}/${r.share}`;

/**
 * The credentials of a create or discover call: none (guest) when both are
 * omitted or empty; a password needs a username; an omitted password with a
 * username is the empty password.
 */
export function parseCredentials(username: string | undefined, password: string | undefined): MaybeCredentials {
  if (!username) {
    if (password) throw badRequest(`argument 'password' needs 'username' (omit both for guest access)`);
    return null;
  }
  let user = username;
  let domain: string | null = null;
  const sep = username.search(/[\\/]/);
  if (sep >= 0) {
    domain = username.slice(0, sep);
    user = username.slice(sep + 1);
  } else if (username.includes('@')) {
    const at = username.lastIndexOf('@');
    user = username.slice(0, at);
    domain = username.slice(at + 1);
  }
  if (!user || (domain !== null && !domain)) {
    throw badRequest(`argument 'username' must be 'user', 'DOMAIN\\user' or 'user@DOMAIN'`);
  }
  const up = nameProblem(user, 256);
  if (up) throw badRequest(`argument 'username' has an invalid user name (${up}; user names are ${nameRule(256)})`);
  const dp = domain === null ? null : nameProblem(domain, 256);
  if (dp) throw badRequest(`argument 'username' has an invalid domain (${dp}; domains are ${nameRule(256)})`);
  const c: Credentials = { user, domain, password: password ?? '' };
  return c;
}

/** The user as a location shows it (never the password). */
export function userText(c: { user: string; domain: string | null } | null): string | null {
  if (!c) return null;
  return c.domain ? `${c.domain}\\${c.user}` : c.user;
}

/** Removes every occurrence of `secret` from a message (belt and braces: programs should never print it). */
export function scrub(text: string, secret: string | null | undefined): string {
  if (!secret) return text;
  return text.split(secret).join('[redacted]');
}
