/** What hostctl's commands print: aligned tables, and the daemon's refusal on stderr. */

/** Rows as aligned columns, headers in capitals. */
export function table(head: readonly string[], rows: readonly (readonly string[])[]): string {
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (r: readonly string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]!))
      .join('  ')
      .trimEnd();
  return [line(head), ...rows.map(line)].join('\n') + '\n';
}

/** The daemon's error message on stderr; exit code 1. */
export function errorOut(r: { status: number; body: any }): number {
  process.stderr.write(`hostctl: ${r.body?.error ?? `status ${r.status}`}\n`);
  return 1;
}
