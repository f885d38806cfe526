/**
 * The one way to change the replicated configuration. The mutator is applied
 * to the current copy and checked; when this node serves the proxy, the
 * result is loaded into Caddy first, so a configuration Caddy refuses is a
 * 400 naming Caddy's reason and is never replicated (Caddy keeps serving the
 * last good one); then it is replicated (version + 1) and every node's data
 * plane follows it. Changes run one at a time: each reads what the one
 * before it wrote.
 */
import { ApiError, badRequest, notFound, unavailable } from '../lib/errors.js';
import { SerialQueue } from '../lib/serial.js';
import { validateProxyConfig, type ProxyConfig, type ProxyDomain } from './config.js';
import type { ProxyContext } from './context.js';
import type { DataPlane } from './dataplane.js';
import { ConfigRefused } from './driver.js';
import type { Incidents } from './incidents.js';

export class ConfigChanges {
  private readonly queue = new SerialQueue();

  constructor(
    private readonly ctx: ProxyContext,
    private readonly plane: DataPlane,
    private readonly incidents: Incidents,
  ) {}

  /**
   * Applies `mutate` and answers `result` of the configuration it made, with
   * its version. `check` runs on the candidate before anything is applied
   * (the proxy's rules on what changed).
   */
  run<T>(
    mutate: (c: ProxyConfig) => ProxyConfig,
    result: (c: ProxyConfig) => T,
    check?: (candidate: ProxyConfig) => Promise<void>,
  ): Promise<T & { version: number }> {
    return this.queue.run(async () => {
      const candidate = validateProxyConfig(mutate(this.ctx.current()));
      await check?.(candidate);
      let snap;
      try {
        snap = await this.plane.applyChange(candidate, () =>
          this.ctx.cluster.proxyConfig.update((cur) => validateProxyConfig(mutate(structuredClone(cur as ProxyConfig)))),
        );
      } catch (err) {
        if (err instanceof ConfigRefused) {
          await this.incidents.capture('config_refused', `Caddy refused a change: ${err.reason}`, {
            reason: err.reason,
            refused_config: await this.plane.preview(candidate).catch(() => null),
          });
          throw badRequest(`Caddy refused the configuration: ${err.reason}`);
        }
        if (err instanceof ApiError) throw err;
        throw unavailable(`the proxy could not apply the change: ${(err as Error).message}`);
      }
      void this.plane.kick();
      return { ...result(snap.config as ProxyConfig), version: snap.version };
    });
  }
}

/** The domain named `name` in `c`; 404 when there is none. */
export function domainOf(c: ProxyConfig, name: string): ProxyDomain {
  const d = c.domains.find((x) => x.name === name);
  if (!d) throw notFound(`domain '${name}' not found`);
  return d;
}
