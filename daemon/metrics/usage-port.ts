/**
 * The ports the metrics domain reads at scrape time, never on another call's
 * path (docs/metrics.md): `usage`, what a domain reads cheaply of its running
 * resources for the per-resource families (beside `guests`, which gives each
 * resource's id, name and state); `mountStates` (locations) and
 * `proxyFigures` (the proxy), read-only views for the aggregates.
 *
 * They are declared here, as an augmentation of PortTypes, so that the metrics
 * work needs no edit of daemon/domain.ts; their place is PortTypes itself.
 */
import type {} from '../domain.js';

declare module '../domain.js' {
  /** One running resource's cumulative figures (null: its runtime does not give that one). */
  interface ResourceUsage {
    /** Its id in its own domain, as in the guests port. */
    id: string;
    cpu_seconds: number | null;
    memory_bytes: number | null;
    disk_read_bytes: number | null;
    disk_written_bytes: number | null;
    network_received_bytes: number | null;
    network_transmitted_bytes: number | null;
  }

  interface UsageSource {
    /** The guests port's kind of the resources it reads. */
    kind: GuestInfo['kind'];
    /** Figures of the running resources; a resource that is not running is left out. */
    usage(): Promise<ResourceUsage[]>;
  }

  /** Each location's status as the API shows it (`mounted`, `unavailable`, `disconnected`). */
  interface MountStates {
    statuses(): string[];
  }

  /** The proxy as this member serves it: its configuration's versions and each base domain's certificate. */
  interface ProxyFigures {
    /** The replicated configuration's version, the one this member's Caddy runs (null: none yet), and whether its last apply failed. */
    config(): { version: number; applied_version: number | null; apply_failed: boolean };
    /** Each base domain's wildcard certificate's end of validity as this member's Caddy storage holds it (null: none stored). */
    certificates(): Array<{ domain: string; not_after: string | null }>;
    /** Calls `watch` after every load of a configuration into this member's Caddy: `loaded`, `refused` by Caddy, or `failed` to reach it. */
    onApply(watch: (result: 'loaded' | 'refused' | 'failed', seconds: number) => void): void;
  }

  interface PortTypes {
    usage: UsageSource;
    mountStates: MountStates;
    proxyFigures: ProxyFigures;
  }
}
