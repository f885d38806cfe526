/**
 * `hostctl proxy ...`: the reverse proxy at a glance, through the admin socket.
 *
 *   proxy status [--json]        holder, epoch, Caddy, floating address, DNS, what is missing
 *   proxy enable | disable       PATCH /proxy
 *   proxy entries                every domain and entry of the replicated configuration
 *   proxy diag                   diagnostics from this node (it must hold the proxy)
 *   proxy incidents [ID]         captured incident bundles (one in full with ID)
 */
import { commandGroups, groupUsage, type Command } from './groups.js';

const USAGE = `usage: hostctl proxy <command>

  status [--json]     holder, epoch, Caddy, floating address, DNS, what is missing
  enable | disable    turn the proxy on or off (cluster-wide)
  entries             domains and entries
  diag                diagnostics (on the holder)
  incidents [ID]      incident bundles; one in full with ID
`;

const API = '/api/v1/proxy';

function out(r: { status: number; body: any }, ok: number, print: (b: any) => void): number {
  if (r.status !== ok) {
    process.stderr.write(`hostctl: ${r.body?.error ?? `status ${r.status}`}\n`);
    return 1;
  }
  print(r.body);
  return 0;
}

const json = (b: unknown) => process.stdout.write(JSON.stringify(b, null, 2) + '\n');

export const proxyCommand: Command = async (argv, client) => {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'status':
      return out(await client.request('GET', `${API}/host-status`), 200, (b) => {
        if (rest.includes('--json')) return json(b);
        const lines = [
          `holder ${b.holder ?? 'none'} (epoch ${b.epoch})${b.holding ? '  <- this node' : ''}`,
          `proxy ${b.enabled ? 'enabled' : 'disabled'}, ${b.serving ? 'serving here' : 'not serving here'}; caddy ${b.caddy_version ?? 'missing'} ${b.caddy_running ? 'running' : 'stopped'}`,
          `configuration version ${b.config_version}, applied ${b.applied_version ?? '-'}${b.last_apply_error ? `; last refusal: ${b.last_apply_error.reason}` : ''}`,
          `floating address ${b.vip.claimed ? `${b.vip.cidrs.join(', ')} on ${b.vip.iface}` : 'not held here'}${b.vip.error ? ` (${b.vip.error})` : ''}`,
          `dns ${b.dns.listen ?? 'off'}${b.dns.running ? ' running' : ''}`,
          ...b.missing.map((m: string) => `missing: ${m}`),
        ];
        process.stdout.write(lines.join('\n') + '\n');
      });
    case 'enable':
    case 'disable':
      return out(await client.request('PATCH', API, { enabled: sub === 'enable' }), 200, (b) =>
        process.stdout.write(`proxy ${b.enabled ? 'enabled' : 'disabled'} (version ${b.version})\n`),
      );
    case 'entries':
      return out(await client.request('GET', `${API}/config`), 200, (b) => {
        for (const d of b.config.domains) {
          process.stdout.write(`${d.name} (${d.cert_source})\n`);
          for (const e of d.entries) process.stdout.write(`  ${e.subdomain}.${d.name}:${e.listen_port} -> ${e.host ?? e.target_id}:${e.port}\n`);
        }
      });
    case 'diag':
      return out(await client.request('GET', `${API}/diagnostics`), 200, json);
    case 'incidents':
      if (rest[0]) return out(await client.request('GET', `${API}/incidents/${encodeURIComponent(rest[0])}`), 200, json);
      return out(await client.request('GET', `${API}/incidents`), 200, (b) => {
        for (const i of b.incidents) process.stdout.write(`${i.incident_id}  ${i.at}  ${i.kind}  ${i.summary}\n`);
      });
    default:
      process.stderr.write(USAGE);
      return 2;
  }
};

commandGroups.set('proxy', proxyCommand);
groupUsage.set('proxy', USAGE);
