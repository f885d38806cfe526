/**
 * Certificates on the holder: GET /proxy/certs (each base domain's wildcard
 * certificate as Caddy stored it, and the internal CA's root) and POST
 * /proxy/domains/{domain}/certs/renew (a fresh certificate now, answered once
 * Caddy serves it). Both run on the holder; another member hands the call on.
 */
import tls from 'node:tls';
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { CallContext } from '../lib/caller.js';
import { badRequest, conflict, unavailable } from '../lib/errors.js';
import { domainOf } from './change.js';
import type { ProxyDomain } from './config.js';
import type { ProxyContext } from './context.js';
import type { DataPlane } from './dataplane.js';
import type { CaddyPlane } from './plane-caddy.js';
import type { Providers } from './providers.js';

type CertView = ResultOf<'proxy_certs_renew'>['cert'];

/** How long a renewal waits for Caddy to store and then serve the new certificate. */
const RENEW_WITHIN_MS = 60_000;

export class CertOps {
  constructor(
    private readonly ctx: ProxyContext,
    private readonly providers: Providers,
    private readonly caddy: CaddyPlane,
    private readonly plane: DataPlane,
  ) {}

  async list(call: CallContext): Promise<ResultOf<'proxy_certs_list'>> {
    return this.ctx.onHolder(call, async () => {
      const cfg = this.ctx.current();
      const root = await this.caddy.caRoot();
      // The internal CA's root is the same on every member: trusting it once covers moves and takeovers.
      return {
        node_id: this.ctx.node.id,
        internal_ca: { root_pem: root.certPem, sha256: root.fingerprint },
        certs: await Promise.all(cfg.domains.map((d) => this.certOf(d))),
      };
    });
  }

  /** The last error Caddy logged about `*.<domain>`'s certificate (OCSP stapling aside), or why its provider cannot work. */
  private async lastError(d: ProxyDomain): Promise<string | null> {
    if (d.cert_source !== 'internal') {
      const p = await this.providers.status(d.cert_source);
      if (!p.available) return p.reason;
    }
    const subject = `*.${d.name}`;
    const line = [...this.ctx.drivers.caddy.log(400)]
      .reverse()
      .find(
        (l) =>
          (l.level === 'error' || l.level === 'warn') &&
          l.logger.startsWith('tls') &&
          l.msg !== 'stapling OCSP' &&
          (l.fields.identifier === subject || (Array.isArray(l.fields.identifiers) && l.fields.identifiers.includes(subject))),
      );
    return line ? `${line.ts} ${line.msg}${line.fields.error ? `: ${String(line.fields.error)}` : ''}` : null;
  }

  private async certOf(d: ProxyDomain): Promise<CertView> {
    const base: CertView = {
      domain: d.name,
      cert_source: d.cert_source,
      subject: `*.${d.name}`,
      issuer: null,
      issuer_kind: d.cert_source === 'internal' ? 'internal' : 'acme',
      serial: null,
      not_before: null,
      not_after: null,
      managed: false,
      last_error: await this.lastError(d),
    };
    const stored = this.ctx.drivers.caddy.storedCertificate(d.name);
    if (!stored) return base;
    if ('error' in stored) return { ...base, last_error: stored.error };
    return {
      ...base,
      issuer: stored.issuer,
      serial: stored.serial,
      not_before: stored.not_before,
      not_after: stored.not_after,
      managed: true,
      storage_issuer: stored.storage_issuer,
    };
  }

  /** The proxyFigures port (metrics): each base domain's certificate's end of validity as this member's Caddy storage holds it. */
  expiries(): Array<{ domain: string; not_after: string | null }> {
    return this.ctx.current().domains.map((d) => {
      const stored = this.ctx.drivers.caddy.storedCertificate(d.name);
      return { domain: d.name, not_after: stored && !('error' in stored) ? stored.not_after : null };
    });
  }

  /** The serial of the certificate Caddy serves for `name` on `port` (null when it does not answer). */
  private servedSerial(name: string, port: number): Promise<string | null> {
    const lh = this.ctx.settings.listenHost;
    const host = lh === '' || lh === '0.0.0.0' ? '127.0.0.1' : lh === '::' ? '::1' : lh;
    return new Promise((resolve) => {
      const s = tls.connect({ host, port, servername: name, rejectUnauthorized: false, timeout: 2000 }, () => {
        const serial = s.getPeerCertificate()?.serialNumber ?? null;
        s.destroy();
        resolve(serial ? serial.toUpperCase() : null);
      });
      s.on('error', () => resolve(null));
      s.on('timeout', () => {
        s.destroy();
        resolve(null);
      });
    });
  }

  async renew(args: ArgsOf<'proxy_certs_renew'>, call: CallContext): Promise<ResultOf<'proxy_certs_renew'>> {
    domainOf(this.ctx.current(), args.domain);
    return this.ctx.onHolder(call, async () => {
      const d = domainOf(this.ctx.current(), args.domain);
      if (!this.ctx.serving()) throw conflict('the proxy is disabled: enable it (PATCH /proxy) before renewing certificates');
      if (d.cert_source !== 'internal') {
        const p = await this.providers.status(d.cert_source);
        if (!p.available) throw badRequest(`domain '${d.name}' uses cert_source '${d.cert_source}': ${p.reason}`);
      }
      const before = await this.certOf(d);
      await this.plane.renew(d.name);
      const deadline = Date.now() + RENEW_WITHIN_MS;
      let after = await this.certOf(d);
      while (!(after.managed && after.serial !== before.serial)) {
        if (Date.now() > deadline) throw unavailable(`no new certificate for *.${d.name} within 60 s: ${after.last_error ?? 'Caddy reported no error yet'}`);
        await new Promise((r) => setTimeout(r, 50));
        after = await this.certOf(d);
      }
      // Caddy swaps the certificate it serves just after storing it: wait for that too.
      if (d.entries.length) {
        const e = d.entries[0];
        while ((await this.servedSerial(`${e.subdomain}.${d.name}`, e.listen_port)) !== after.serial) {
          if (Date.now() > deadline) throw unavailable(`Caddy stored a new certificate for *.${d.name} but does not serve it within 60 s`);
          await new Promise((r) => setTimeout(r, 50));
        }
      }
      call.note({
        summary: `Certificate for *.${d.name} renewed (serial ${after.serial})`,
        target: `proxy/domains/${d.name}/certs`,
        metadata: { previous_serial: before.serial, serial: after.serial },
      });
      return { renewed: true, previous_serial: before.serial, cert: after };
    });
  }
}
