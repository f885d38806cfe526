/**
 * Whether and how the proxy serves, cluster-wide: PATCH /proxy (enabled)
 * and PATCH /proxy/http3 (HTTP/3 beside HTTP/1 and HTTP/2).
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { ensureAvailable } from '../lib/availability.js';
import type { CallContext } from '../lib/caller.js';
import { actorOf } from '../lib/operator.js';
import type { ConfigChanges } from './change.js';
import type { ProxyContext } from './context.js';
import type { DataPlane } from './dataplane.js';

export class ServingOps {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly changes: ConfigChanges,
    private readonly plane: Pick<DataPlane, 'actingFor'>,
  ) {}

  async setEnabled(args: ArgsOf<'proxy_update'>, call: CallContext): Promise<ResultOf<'proxy_update'>> {
    // The holder runs Caddy (under setpriv) as soon as the change lands.
    if (args.enabled && this.ctx.holdsProxy()) await ensureAvailable(this.ctx.drivers.caddy, ['caddy', 'setpriv']);
    // This node's part of the change (Caddy started or stopped here) and its state event come before the answer.
    const r = await this.plane.actingFor(actorOf(call), () =>
      this.changes.run(
        (c) => ({ ...c, enabled: args.enabled }),
        (c) => ({ enabled: c.enabled }),
      ),
    );
    call.note({ summary: `Proxy ${args.enabled ? 'enabled' : 'disabled'}`, target: 'proxy', metadata: { enabled: args.enabled, version: r.version } });
    return { ...r, serving: this.ctx.serving(), holder: this.ctx.holder() };
  }

  async setHttp3(args: ArgsOf<'proxy_http3_update'>, call: CallContext): Promise<ResultOf<'proxy_http3_update'>> {
    const r = await this.changes.run(
      (c) => ({ ...c, http3: args.enabled }),
      (c) => ({ http3: c.http3, protocols: c.http3 ? ['h1' as const, 'h2' as const, 'h3' as const] : ['h1' as const, 'h2' as const] }),
    );
    call.note({ summary: `Proxy HTTP/3 ${args.enabled ? 'on' : 'off'}`, target: 'proxy/http3', metadata: { http3: args.enabled, version: r.version } });
    return r;
  }
}
