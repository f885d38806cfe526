/**
 * Share addresses and credentials as the locations domain accepts them, and
 * the text forms the SMB programs read (smbclient's auth file, smbnetfs's
 * config). Pure: no I/O, unit-tested.
 */
import { badRequest } from '../../lib/errors.js';

export interface Remote {
  host: string;
  share: string;
}

export interface Credentials {
  /** The user name without its domain. */
  user: string;
  /** Workgroup or domain (`DOMAIN\user`, `DOMAIN/user` or `user@DOMAIN` given), or null. */
  domain: string | null;
  password: string;
}

/** Guest access is `null` credentials. */
export type MaybeCredentials = Credentials | null;

// A DNS name or NetBIOS name (letters, digits, '.', '-', '_'), or an IPv4 address.
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
export const nameRule = (max: number) => `1-${max} characters without \\ / : * ? " < > | [ ] + ; = , % @ or control characters, not starting with '-' and without a space at either end`;

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

/**
 * The rule a stored share address must still pass (records made before it
 * existed may not): null, or a message naming what is refused. User and
 * domain are not secret; the password is never looked at here.
 */
export function remoteRuleProblem(host: string, share: string, user: string | null, domain: string | null): string | null {
  if (!HOST.test(host) || host.includes('..')) return `host name '${host.slice(0, 64).replace(CONTROLS, '?')}' is refused (a DNS or NetBIOS name, or an IPv4 address)`;
  const sp = share === '.' || share === '..' ? `it is '${share}'` : nameProblem(share, 80);
  if (sp) return `share name '${share.slice(0, 80).replace(CONTROLS, '?')}' is refused (${sp}; share names are ${nameRule(80)})`;
  const up = user === null ? null : nameProblem(user, 256);
  if (up) return `user name '${user!.slice(0, 64).replace(CONTROLS, '?')}' is refused (${up}; user names are ${nameRule(256)})`;
  const dp = domain === null ? null : nameProblem(domain, 256);
  if (dp) return `domain '${domain!.slice(0, 64).replace(CONTROLS, '?')}' is refused (${dp}; domains are ${nameRule(256)})`;
  return null;
}

/** `//host/share` or `host/share` (one trailing '/' tolerated); 400 naming `remote` otherwise. */
export function parseRemote(input: unknown, arg = 'remote'): Remote {
  if (typeof input !== 'string' || input.trim() === '') throw badRequest(`argument '${arg}' must be a share address of the form //<host>/<share> or <host>/<share>`);
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
  if (!HOST.test(host) || host.includes('..')) throw badRequest(`argument '${arg}' has an invalid host name '${host.slice(0, 64)}' (a DNS or NetBIOS name, or an IPv4 address)`);
  const problem = share === '.' || share === '..' ? `it is '${share}'` : nameProblem(share, 80);
  if (problem) throw badRequest(`argument '${arg}' has an invalid share name (${problem}; share names are ${nameRule(80)})`);
  return { host, share };
}

export const remoteText = (r: Remote): string => `//${r.host}/${r.share}`;

/** A host name or IP alone (discovery's `host`). */
export function parseHost(input: unknown, arg = 'host'): string {
  if (typeof input !== 'string' || !HOST.test(input) || input.includes('..')) {
    throw badRequest(`argument '${arg}' must be a DNS or NetBIOS host name or an IPv4 address`);
  }
  return input;
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;
export const isIPv4 = (s: string): boolean => IPV4.test(s);

export function parseIp(input: unknown, arg = 'ip'): string {
  if (typeof input !== 'string' || !isIPv4(input)) throw badRequest(`argument '${arg}' must be an IPv4 address`);
  return input;
}

/**
 * The credentials of a create or discover call: none (guest) when both are
 * omitted; a password needs a username; an omitted password with a username
 * is the empty password. Control characters are refused because every
 * credentials format the SMB programs read is line based.
 */
export function parseCredentials(username: unknown, password: unknown): MaybeCredentials {
  const hasUser = username !== undefined && username !== null && username !== '';
  const hasPass = password !== undefined && password !== null;
  if (!hasUser) {
    if (hasPass && password !== '') throw badRequest(`argument 'password' needs 'username' (omit both for guest access)`);
    return null;
  }
  if (typeof username !== 'string') throw badRequest(`argument 'username' must be a string`);
  if (hasPass && typeof password !== 'string') throw badRequest(`argument 'password' must be a string`);
  if (username.length > 256 || CONTROL.test(username)) throw badRequest(`argument 'username' must be at most 256 characters without control characters`);
  const pw = (password as string | undefined) ?? '';
  // Never quote the value: the message must not carry any part of the secret.
  if (pw.length > 1024 || CONTROL.test(pw)) throw badRequest(`argument 'password' must be at most 1024 characters without control characters`);
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
  return { user, domain, password: pw };
}

/** The user as the record shows it (never the password). */
export function userText(c: MaybeCredentials): string | null {
  if (!c) return null;
  return c.domain ? `${c.domain}\\${c.user}` : c.user;
}

/** A double-quoted string for smbnetfs's config (it reads \" and \\ as escapes). */
export function smbnetfsQuote(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** The kernel client's `credentials=` file. */
export function cifsCredentialsFile(c: Credentials): string {
  return `username=${c.user}\npassword=${c.password}\n${c.domain ? `domain=${c.domain}\n` : ''}`;
}
