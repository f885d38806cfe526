/** How the proxy tests start hostd nodes, and what their runtime gate asks. */
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import type { Availability } from '../../daemon/lib/availability.js';
import { CaddyRuntime } from '../../daemon/proxy/caddy/index.js';
import { IpAddresses } from '../../daemon/proxy/net/index.js';
import { operations } from '../../api/registry/index.js';
import { resultProblem } from '../../api/validate.js';
import { templateMatches } from './conformance.js';
import { NetnsHub } from './netns-hub.js';

/**
 * What the proxy's own drivers report on this machine (caddy, setpriv, ip,
 * arping), as host-status lists them: the source of the proxy suites'
 * runtime gate (requireRuntime). Probing runs the programs' version
 * commands only; nothing is written.
 */
export async function proxyAvailability(): Promise<Availability[]> {
  const caddy = new CaddyRuntime(path.join(os.tmpdir(), 'hostd-proxy-gate'), pino({ level: 'silent' }));
  return [...(await caddy.availability({ fresh: true })), ...(await new IpAddresses().availability({ fresh: true }))];
}

/** What the lab suites need besides the runtimes: network namespaces (root). */
export async function labMissing(): Promise<string | null> {
  return (await NetnsHub.available()) ? null : 'network namespaces need root';
}

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
  const lines = [
    'proxy:',
    '  listen_host: ""',
    `  dns_listen: "${addr}:53"`,
    '  tick_ms: 100',
    ...Object.entries(extra).map(([k, v]) => `  ${k}: ${JSON.stringify(v)}`),
  ];
  return lines.join('\n') + '\n';
}

/**
 * Why a success answer of `METHOD /api/v1<p>` does not fit its operation's
 * result schema, or undefined (errors, and paths outside /proxy: undefined). The
 * runtime suites check every answer they get: the conformance walk reaches
 * the proxy's operations without Caddy serving, these with it.
 */
export function proxyResultProblem(method: string, p: string, status: number, body: unknown): string | undefined {
  const path = p.split('?')[0];
  if (status < 200 || status > 299 || !path.startsWith('/proxy')) return undefined;
  const op = operations.find((o) => o.method === method && o.domain === 'proxy' && templateMatches(o, path));
  if (!op) return `no proxy operation answers ${method} ${path}`;
  const problem = resultProblem(op, body);
  return problem && `${op.name}: ${problem}`;
}
