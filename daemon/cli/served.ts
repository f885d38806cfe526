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

export const README_BEGIN = '<!-- served: made by `npm run readme` from the catalog of a fresh daemon; test/integration/clients-served.test.ts keeps it true -->';
export const README_END = '<!-- /served -->';

/** The README's opening block: the same three lines, as one paragraph. */
export function servedMarkdown(s: Served): string {
  const parts = [`**This build serves:** ${s.served.join(', ') || 'none'}.`];
  if (s.partly.length) parts.push(`**Partly:** ${s.partly.map(([d, b, t]) => `${d} (${b} of ${t} operations)`).join(', ')}.`);
  if (s.notYet.length) parts.push(`**Not yet:** ${s.notYet.join(', ')} (their operations answer 501 until they land).`);
  return `${README_BEGIN}\n${parts.join('\n')}\n${README_END}`;
}

/** `readme` with its served block replaced (inserted after the first paragraph when it has none). */
export function withServedBlock(readme: string, block: string): string {
  const b = readme.indexOf(README_BEGIN);
  const e = readme.indexOf(README_END);
  if (b !== -1 && e > b) return readme.slice(0, b) + block + readme.slice(e + README_END.length);
  const firstBreak = readme.indexOf('\n\n', readme.indexOf('\n\n') + 2);
  return `${readme.slice(0, firstBreak)}\n\n${block}${readme.slice(firstBreak)}`;
}
