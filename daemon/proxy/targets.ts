/**
 * Entry targets: the apps, VMs and LXC containers the guest sources report.
 * A `target_id` is `<kind>:<id>` (`vm:101`, `lxc:101`, `app:wiki`); a bare
 * id is accepted when exactly one guest has it (VM and container ids are
 * both integers and can collide, so the kind-qualified form is the stable one).
 */
import net from 'node:net';
import type { GuestInfo, GuestSource } from '../domain.js';
import { badRequest, notFound } from '../lib/errors.js';

export const TARGET_KINDS = ['app', 'vm', 'lxc'] as const;

export interface UpstreamTarget {
  target_id: string;
  kind: GuestInfo['kind'];
  id: string;
  name: string;
  state: string;
  running: boolean;
  addresses: string[];
}

const targetIdOf = (g: GuestInfo) => `${g.kind}:${g.id}`;

/** Every guest an entry can target, from every source that answers. */
export async function listTargets(sources: GuestSource[]): Promise<{ targets: UpstreamTarget[]; errors: string[] }> {
  const targets: UpstreamTarget[] = [];
  const errors: string[] = [];
  await Promise.all(
    sources.map(async (s) => {
      try {
        for (const g of await s.guests()) {
          if (!(TARGET_KINDS as readonly string[]).includes(g.kind)) continue;
          targets.push({ target_id: targetIdOf(g), kind: g.kind, id: g.id, name: g.name, state: g.state, running: g.running, addresses: [...g.addresses] });
        }
      } catch (err) {
        errors.push((err as Error).message);
      }
    }),
  );
  targets.sort((a, b) => a.target_id.localeCompare(b.target_id));
  return { targets, errors };
}

/** The guest a target_id names: 404 when none, 400 when a bare id is ambiguous. */
export function findTarget(targets: UpstreamTarget[], targetId: string): UpstreamTarget {
  const exact = targets.find((t) => t.target_id === targetId);
  if (exact) return exact;
  if (!targetId.includes(':')) {
    const byId = targets.filter((t) => t.id === targetId);
    if (byId.length === 1) return byId[0];
    if (byId.length > 1) throw badRequest(`target_id '${targetId}' is ambiguous: ${byId.map((t) => t.target_id).join(', ')}; use one of those`);
  }
  throw notFound(`target '${targetId}' not found (GET /proxy/upstreams lists the apps, VMs and containers)`);
}

/**
 * The address to dial for a target and upstream port. An app is reached
 * only on a port it publishes (`host:port` with that port): any other port
 * of its address (often 127.0.0.1) is not the app but whatever else listens
 * there. A VM or container: its first IPv4 address (then any) with the port.
 * An error when the target has no such address now.
 */
export function dialFor(t: UpstreamTarget, port: number): { dial: string; ip: string } | { error: string } {
  const split = t.addresses.map((a) => {
    const m = /^\[?([^\]]+?)\]?:(\d+)$/.exec(a);
    return m && !net.isIPv6(a) ? { host: m[1], port: Number(m[2]) } : { host: a, port: null as number | null };
  });
  if (t.kind === 'app') {
    const published = split.find((a) => a.port === port);
    if (published) return { dial: hostPort(published.host, port), ip: published.host };
    const ports = split.filter((a) => a.port !== null).map((a) => a.port);
    return {
      error: ports.length
        ? `${t.target_id} publishes no host port ${port} (it publishes ${ports.join(', ')})`
        : `${t.target_id} publishes no port now (state ${t.state})`,
    };
  }
  const bare = split.filter((a) => a.port === null);
  const any = bare.find((a) => net.isIPv4(a.host)) ?? bare[0];
  return any ? { dial: hostPort(any.host, port), ip: any.host } : { error: `target ${t.target_id} has no address now (state ${t.state})` };
}

export const hostPort = (host: string, port: number) => (net.isIPv6(host) ? `[${host}]:${port}` : `${host}:${port}`);
