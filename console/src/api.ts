/**
 * The console's one way to the daemon: the public API under /api/v1, as the
 * signed-in administrator (the session cookie) or as a pasted token. A
 * pasted token lives in this module's memory only: never in localStorage,
 * sessionStorage or a cookie, so it is gone when the tab closes or reloads.
 */
export type Auth = { kind: 'admin' } | { kind: 'token'; token: string };

export class ApiFailure extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

let auth: Auth | null = null;
/** The member the domain pages show (the member picker); null: the host serving the console. */
let member: string | null = null;

export const setAuth = (a: Auth | null): void => {
  auth = a;
  if (!a) member = null;
};
export const currentAuth = (): Auth | null => auth;
export const setMember = (peerId: string | null): void => {
  member = peerId;
};
export const currentMember = (): string | null => member;

/**
 * Every request says it comes from the console (X-Hostd-Console: 1): the
 * daemon accepts the session cookie only with that header, which a page
 * from another site cannot send, and marks the activity row `client: console`.
 */
export async function request(method: string, path: string, body?: unknown): Promise<any> {
  const headers: Record<string, string> = { 'x-hostd-console': '1' };
  if (auth?.kind === 'token') headers.authorization = `Bearer ${auth.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: 'same-origin',
    cache: 'no-store',
  });
  const text = await res.text();
  let parsed: any;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!res.ok) throw new ApiFailure(res.status, parsed?.error ?? `HTTP ${res.status}`);
  return parsed ?? {};
}

/** A call on the host serving the console (overview, tokens, the member list, moving the proxy). */
export const api = (method: string, path: string, body?: unknown): Promise<any> => request(method, `/api/v1${path}`, body);

/** Adds `peer_id` for the chosen member where the API takes its arguments: the query for GET and DELETE, else the body. */
export function onMember(method: string, path: string, body?: Record<string, unknown>): [string, Record<string, unknown> | undefined] {
  if (!member) return [path, body];
  if (method === 'GET' || method === 'DELETE') return [`${path}${path.includes('?') ? '&' : '?'}peer_id=${encodeURIComponent(member)}`, body];
  return [path, { ...(body ?? {}), peer_id: member }];
}

/** A call on the member chosen in the picker: what every domain page uses. */
export function memberApi(method: string, path: string, body?: Record<string, unknown>): Promise<any> {
  const [p, b] = onMember(method, path, body);
  return api(method, p, b);
}

/** Builds `a/b/c` path segments safely (ids and names from the API may hold any character). */
export const seg = (...parts: Array<string | number>): string => parts.map((p) => encodeURIComponent(String(p))).join('/');
