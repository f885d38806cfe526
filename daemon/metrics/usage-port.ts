/**
 * The `usage` port: what a domain reads cheaply of its running resources for
 * the per-resource metric families (docs/metrics.md). A domain provides it
 * beside `guests` (which gives each resource's id, name and state); the
 * metrics domain reads it at scrape time, never on another call's path.
 *
 * It is declared here, as an augmentation of PortTypes, so that the metrics
 * work needs no edit of daemon/domain.ts; its place is PortTypes itself.
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

  interface PortTypes {
    usage: UsageSource;
  }
}
