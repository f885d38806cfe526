/** A web origin (scheme, host, port) in the form browsers send in `Origin`. */
const ORIGIN_RE = /^(https?):\/\/([a-z0-9.-]+|\[[0-9a-f:.]+\])(?::(\d{1,5}))?$/;

/** The origin as a browser sends it, or an error message for the config. */
export function parseOrigin(value: unknown, where: string): string {
  if (typeof value !== 'string') throw new Error(`${where} must be a string like https://dash.lab:8443`);
  const v = value.trim().toLowerCase();
  const m = ORIGIN_RE.exec(v);
  if (!m || (m[3] !== undefined && (Number(m[3]) < 1 || Number(m[3]) > 65535))) {
    throw new Error(`${where} '${value}' must be an origin: http or https, a host, an optional port, and nothing else (no path, no '*')`);
  }
  // Browsers leave the default port out of Origin.
  const defaultPort = m[1] === 'https' ? '443' : '80';
  return m[3] === undefined || m[3] === defaultPort ? `${m[1]}://${m[2]}` : `${m[1]}://${m[2]}:${m[3]}`;
}
