/** The proxy's DnsDriver: the responder's own UDP and TCP sockets (responder.ts); no host program. */
import type { Availability } from '../../lib/availability.js';
import type { DnsDriver, DnsServer, ResponderHooks } from '../driver.js';
import type { HostPort } from '../host-port.js';
import { DnsResponder } from './responder.js';

export class DnsSockets implements DnsDriver {
  /** Sockets of hostd's own: nothing to install. */
  async availability(): Promise<Availability[]> {
    return [];
  }

  async serve(listen: HostPort, hooks: ResponderHooks): Promise<DnsServer> {
    const r = new DnsResponder(listen, hooks);
    await r.start();
    return r;
  }
}
