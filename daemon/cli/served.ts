/**
 * What this build serves, from the catalog's `implemented` flags (each is
 * `isBuilt` of the operation's handler): one line per state, domains by
 * registry group. `hostctl ops` prints it, and the README's opening block is
 * made from it (`npm run readme`).
 */
export interface CatalogRow {
  operation: string;
  domain: string;
  implemented: boolean;
}

export interface Served {
  /** Domains whose every operation is built. */
  served: string[];
  /** Domains with some operations built: [domain, built, total]. */
  partly: Array<[string, number, number]>;
  /** Domains with none built yet. */
  notYet: string[];
}

export function servedOf(rows: readonly CatalogRow[]): Served {
  const counts = new Map<string, [number, number]>();
  for (const r of rows) {
    const c = counts.get(r.domain) ?? [0, 0];
    if (r.implemented) c[0]++;
    c[1]++;
    counts.set(r.domain, c);
  }
  const out: Served = { served: [], partly: [], notYet: [] };
  for (const [domain, [built, total]] of counts) {
    if (built === total) out.served.push(domain);
    else if (built === 0) out.notYet.push(domain);
    else out.partly.push([domain, built, total]);
  }
  return out;
}

/** The summary as plain lines. */
export function servedLines(s: Served): string[] {
  const lines = [`serves: ${s.served.join(', ') || 'none'}`];
  if (s.partly.length) lines.push(`partly: ${s.partly.map(([d, b, t]) => `${d} (${b} of ${t} operations)`).join(', ')}`);
  if (s.notYet.length) lines.push(`not yet: ${s.notYet.join(', ')} (their operations answer 501)`);
  return lines;
}
