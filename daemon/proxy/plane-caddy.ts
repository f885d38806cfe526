/**
 * Caddy on the holder, as the data plane runs it: started and stopped
 * through the intent journal (a restart after a crash finds and kills a
 * Caddy the store did not record yet), given the internal CA's root that is
 * the same on every member, and a plan: the configuration with the rules'
 * decisions taken on this node (screen.ts).
 */
import crypto from 'node:crypto';
import type { ProxyConfig } from './config.js';
import type { ProxyContext } from './context.js';
import type { CaRoot, ServePlan } from './driver.js';
import type { Providers } from './providers.js';
import type { Screened, Screening } from './screen.js';

/** What the members' shared secret is used for here (changing it changes every root). */
const CA_PURPOSE = 'hostd proxy internal CA root v1';

export class CaddyPlane {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly screening: Screening,
    private readonly providers: Providers,
  ) {}

  /**
   * The internal CA's root, the same on every member: derived from the
   * cluster's shared secret, or (outside a cluster) from a seed this node keeps
   * in its secret store. Joining or leaving a cluster changes it.
   */
  async caRoot(): Promise<CaRoot> {
    const seed = this.ctx.cluster.sharedSecret(CA_PURPOSE) ?? (await this.localSeed());
    return this.ctx.drivers.caddy.caRoot(seed);
  }

  private async localSeed(): Promise<Buffer> {
    const { secrets } = this.ctx;
    let hex = await secrets.get('proxy', 'ca-seed');
    if (!hex) {
      hex = crypto.randomBytes(32).toString('hex');
      await secrets.put('proxy', 'ca-seed', hex);
    }
    return Buffer.from(hex, 'hex');
  }

  /** What Caddy is to serve for `cfg` on this node, and the rules' decisions it was made from. */
  async plan(cfg: ProxyConfig): Promise<{ plan: ServePlan; screened: Screened }> {
    const screened = await this.screening.screen(cfg);
    const plan: ServePlan = {
      config: cfg,
      listenHost: this.ctx.settings.listenHost,
      upstreams: screened.upstreams,
      refused: screened.refused,
      skipDomains: new Set(screened.skipDomains.keys()),
      credentials: this.providers.all(),
      caRoot: await this.caRoot(),
    };
    return { plan, screened };
  }

  /** Starts Caddy unless it runs. */
  async start(): Promise<void> {
    const { caddy } = this.ctx.drivers;
    if (caddy.running()) return;
    const { records, pause } = this.ctx;
    const boot = caddy.bootFile;
    const root = await this.caRoot();
    await records.journal.run(
      'caddy',
      { kind: 'caddy-start', boot },
      async () => {
        const pid = await caddy.start(root);
        await pause('caddy-started');
        return pid;
      },
      {
        commit: (pid) => [records.putCaddy({ pid, boot })],
        rollback: () => caddy.stop(),
      },
    );
  }

  async stop(): Promise<void> {
    const { caddy } = this.ctx.drivers;
    const { records } = this.ctx;
    if (!caddy.running() && !(await records.caddy())) return;
    await records.journal.run('caddy', { kind: 'caddy-stop', pid: caddy.pid(), boot: caddy.bootFile }, () => caddy.stop(), {
      commit: () => [records.delCaddy()],
    });
  }
}
