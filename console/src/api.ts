/**
 * The console's one way to the daemon: the public API under /api/v1, as the
 * signed-in administrator (the session cookie) or as a pasted token. A
 * pasted token lives in this module's memory only: never in localStorage,
 * sessionStorage or a cookie, so it is gone when the tab closes or reloads.
 */
export type Auth = { kind: 'admin' } | { kind: 'token'; token: string };

export class ApiFailure extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

let auth: Auth | null = null;

export const setAuth = (a: Auth | null): void => {
  auth = a;
};
export const currentAuth = (): Auth | null => auth;

/**
 * Every request says it comes from the console (X-Hostd-Console: 1): the
 * daemon accepts the session cookie only with that header, which a page
 * from another site cannot send, and marks the activity row `client: console`.
 */
export async function request(method: string, path: string, body?: unknown): Promise<any> {
  const headers: Record<string, string> = { 'x-hostd-console': '1' };
  if (auth?.kind === 'token') headers.authorization = `Bearer ${auth.token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin', cache: 'no-store' });
  const text = await res.text();
  let parsed: any = undefined;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    parsed = undefined;
  }
  if (!res.ok) throw new ApiFailure(res.status, parsed?.error ?? `HTTP ${res.status}`);
  return parsed ?? {};
}

export const api = (method: string, path: string, body?: unknown): Promise<any> => request(method, `/api/v1${path}`, body);
