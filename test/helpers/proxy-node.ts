/** How the proxy tests start hostd nodes, and why they would skip. */
import { execFile } from 'node:child_process';

/** Environment of a node in a lab namespace (probes every 500 ms). */
export function proxyNodeEnv(addr: string, name: string): Record<string, string> {
  return {
    HOSTD_NODE_NAME: name,
    HOSTD_HTTP_ADDR: '127.0.0.1:0', // the namespace's own loopback
    HOSTD_CLUSTER_ADDR: `${addr}:7788`,
    HOSTD_FORWARD_DEADLINE_MS: '2000',
    HOSTD_CLUSTER_PROBE_MS: '500',
  };
}

/** The proxy section of a lab node: Caddy on every address of its namespace, DNS on its lab address. */
export function proxyYaml(addr: string, extra: Record<string, string | number | boolean> = {}): string {
  const lines = ['proxy:', '  listen_host: ""', `  dns_listen: "${addr}:53"`, '  tick_ms: 100', ...Object.entries(extra).map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`)];
  return lines.join('\n') + '\n';
}

/** Why the proxy's runtime tests cannot run here, or null. */
export function caddyMissing(): Promise<string | null> {
  const has = (p: string, args: string[]) => new Promise<boolean>((r) => execFile(p, args, (err) => r(!err)));
  return (async () => {
    if (!(await has('caddy', ['version']))) return 'caddy is not installed (deploy/install-deps.sh installs it)';
    if (!(await has('arping', ['-V']))) return 'arping is not installed (iputils-arping; deploy/install-deps.sh installs it)';
    return null;
  })();
}
