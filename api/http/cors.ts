/**
 * CORS for browser clients on another origin that send a bearer token
 * (config `cors_origins`: exact origins, none by default). The answer never
 * carries `Access-Control-Allow-Credentials`, so a browser never sends
 * cookies cross-origin through it: a page elsewhere must hold a token, and a
 * cookie session (the console's) is never usable from another origin.
 * Origins are compared exactly as browsers send them (scheme, host, port).
 */
import type { IncomingMessage } from 'node:http';

export class Cors {
  private readonly origins: ReadonlySet<string>;

  constructor(origins: readonly string[] = []) {
    this.origins = new Set(origins);
  }

  get enabled(): boolean {
    return this.origins.size > 0;
  }

  /** The request's Origin when it is one of the allowed, else undefined. */
  private allowed(req: IncomingMessage): string | undefined {
    const o = req.headers.origin;
    return typeof o === 'string' && this.origins.has(o) ? o : undefined;
  }

  /** Headers for an actual request's answer (flat name, value list). */
  responseHeaders(req: IncomingMessage): string[] {
    if (!this.enabled) return [];
    const o = this.allowed(req);
    // Vary even when refused: a cache must not hand one origin's answer to another.
    return o ? ['access-control-allow-origin', o, 'access-control-expose-headers', 'x-request-id, www-authenticate', 'vary', 'Origin'] : ['vary', 'Origin'];
  }

  /** Headers for a preflight (OPTIONS with Access-Control-Request-Method) to a path allowing `allow`. */
  preflightHeaders(req: IncomingMessage, allow: string): string[] {
    if (!this.enabled) return [];
    const o = this.allowed(req);
    if (!o || typeof req.headers['access-control-request-method'] !== 'string') return ['vary', 'Origin'];
    return [
      'access-control-allow-origin',
      o,
      'access-control-allow-methods',
      allow,
      'access-control-allow-headers',
      'authorization, content-type, x-request-id',
      'access-control-max-age',
      '600',
      'vary',
      'Origin',
    ];
  }
}
