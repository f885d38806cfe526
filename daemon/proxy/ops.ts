/**
 * The proxy domain put together: the drivers, the context every part shares,
 * the data plane's parts and the operations, by resource. The domain module
 * (index.ts) builds it once.
 */
import type { AcmeOps } from './acme.js';
import type { CertOps } from './certs.js';
import type { DomainOps } from './domains.js';
import type { EntryOps } from './entries.js';
import type { HolderOps } from './holder.js';
import type { Incidents } from './incidents.js';
import type { NetworkOps } from './network.js';
import type { ServingOps } from './serving.js';
import type { StatusOps } from './status.js';

/** Every operation's file, as handlers.ts maps them. */
export interface ProxyOps {
  holder: HolderOps;
  serving: ServingOps;
  domains: DomainOps;
  entries: EntryOps;
  acme: AcmeOps;
  network: NetworkOps;
  certs: CertOps;
  status: StatusOps;
  incidents: Incidents;
}
