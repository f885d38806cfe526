/**
 * Errors are values carrying an HTTP status from the spec's error table.
 * Every layer throws them; `errorBody` is the one place that turns any thrown
 * value into the `{"error": "..."}` body and status every transport returns.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const badRequest = (msg: string) => new ApiError(400, msg);
/** RFC 6750: a 401 names the scheme it wants, so that clients and proxies know to send a bearer token. */
export const unauthorized = (msg = 'missing or unknown bearer token') => new ApiError(401, msg, { 'WWW-Authenticate': 'Bearer realm="hostd"' });
export const forbidden = (msg: string) => new ApiError(403, msg);
export const notFound = (msg: string) => new ApiError(404, msg);
export const methodNotAllowed = (msg: string, allow: string[]) => new ApiError(405, msg, { Allow: allow.join(', ') });
export const conflict = (msg: string) => new ApiError(409, msg);
export const tooLarge = (msg = 'request body is over 1 MiB (1048576 bytes)') => new ApiError(413, msg);
export const internal = (msg: string) => new ApiError(500, msg);
export const badGateway = (msg: string) => new ApiError(502, msg);
export const unavailable = (msg: string) => new ApiError(503, msg);

export interface ErrorResponse {
  status: number;
  body: { error: string };
  headers: Record<string, string>;
}

/**
 * Turns anything thrown into the status and body a client sees. Only ApiError
 * carries a status: anything else is a 500 naming what happened. A domain maps
 * its own filesystem or program errors to statuses where it knows what they
 * mean (an ENOENT may be a missing file, a missing program or a missing pool).
 */
export function errorBody(err: unknown): ErrorResponse {
  if (err instanceof ApiError) return { status: err.status, body: { error: err.message }, headers: err.headers };
  const e = err as { message?: unknown } | undefined;
  const message = e && typeof e === 'object' && typeof e.message === 'string' && e.message ? e.message : String(err);
  return { status: 500, body: { error: `internal error: ${message}` }, headers: {} };
}

/** The errno code of a Node error, if any. */
export function errnoCode(err: unknown): string | undefined {
  const c = (err as NodeJS.ErrnoException | null)?.code;
  return typeof c === 'string' ? c : undefined;
}
