/**
 * An operator-visible cluster event; the daemon's activity recorder writes it.
 * Without `actor` it is the local operator's doing (hostctl over the admin
 * socket). Events caused over the cluster port say who caused them: `actor`
 * `anonymous` for a client without a certificate, `peer:<node id>` for a
 * member or a joining node, with `metadata.transport` `cluster`.
 */
export interface AuditEvent {
  category: 'auth' | 'system';
  severity: 'info' | 'warning';
  summary: string;
  target: string;
  actor?: string;
  metadata?: Record<string, unknown> & { transport: 'cluster' };
}

/** Who caused an event that came over the cluster port. */
export interface Cause {
  actor: string;
  metadata: Record<string, unknown> & { transport: 'cluster' };
}
