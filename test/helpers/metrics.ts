/** Reading a Prometheus exposition in tests. */

/** The value of one sample (`name{labels} value`) in an exposition, or undefined. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || !line.startsWith(name)) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)/.exec(line);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[3] ?? '').matchAll(/([a-zA-Z_]+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[4]);
  }
  return undefined;
}
