/**
 * Who acts when nobody's token does: the local administrator, through
 * hostctl on the admin socket (operator commands, `hostctl call`), and the
 * daemon's own work done on its behalf (autostart, a warm state made for
 * sandboxes). One name everywhere it is recorded: a task's `owner`, an
 * activity row's `actor`, a record's `created_by`.
 */

/** The owner and actor name of the local administrator. */
export const OPERATOR = 'admin';

/** The token name of the call, or the operator when the call came from no token (admin socket, the daemon itself). */
export function actorOf(ctx?: { caller?: { tokenName: string } } | null): string {
  return ctx?.caller?.tokenName ?? OPERATOR;
}
