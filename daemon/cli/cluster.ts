/**
 * `hostctl cluster ...`: pairing and membership, through the admin socket.
 *
 *   cluster init                        make a cluster CA; this node becomes its first member
 *   cluster join-token [--ttl 15m]      print a one-time join token (alone on its line)
 *   cluster join ADDRESS TOKEN          join the cluster of the node at ADDRESS (host:port)
 *   cluster remove PEER_ID              remove a member everywhere
 *   cluster leave                       this node leaves its cluster (for a node removed while it was down)
 *   cluster status [--json]             members, addresses, reachability
 */
import { parseArgs } from 'node:util';
import { commandGroups, groupUsage, type Command } from './groups.js';
import { errorOut } from './output.js';

const USAGE = `usage: hostctl cluster <command>

  init                         create the cluster (CA + this node's certificate)
  join-token [--ttl 15m]       print a one-time join token (s, m, h suffixes)
  join ADDRESS TOKEN           join the cluster of the member at ADDRESS (host:port)
  remove PEER_ID               remove a member; its certificate is refused at once
  leave                        this node leaves its cluster and forgets it
  status [--json]              this node's view of the cluster
`;

function fail(msg: string): never {
  process.stderr.write(`hostctl: ${msg}\n`);
  process.exit(2);
}

export function parseDuration(text: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(text.trim());
  if (!m) throw new Error(`'${text}' is not a duration like 90s, 15m or 2h`);
  const n = Number(m[1]);
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86400 }[(m[2] ?? 's') as 'ms' | 's' | 'm' | 'h' | 'd'];
  return n * unit;
}

function printStatus(s: any): void {
  if (!s.in_cluster) {
    process.stdout.write(`not in a cluster (node ${s.node_id}, cluster listener ${s.listen}, advertised as ${s.address})\n`);
    return;
  }
  process.stdout.write(`cluster ${s.cluster_id}  node ${s.node_id} (${s.name})  members ${s.members.length}  version ${s.membership_version}\n`);
  const rows = (s.members as any[]).map((m) => [
    m.peer_id + (m.is_self ? ' *' : ''),
    m.name,
    m.address,
    m.reachable ? 'yes' : 'no',
    m.last_seen ?? 'never',
    m.fingerprint.slice(0, 16),
  ]);
  const head = ['PEER_ID', 'NAME', 'ADDRESS', 'REACHABLE', 'LAST SEEN', 'FINGERPRINT'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i]))
      .join('  ')
      .trimEnd();
  process.stdout.write([line(head), ...rows.map(line)].join('\n') + '\n');
}

export const clusterCommand: Command = async (argv, client) => {
  const [sub, ...rest] = argv;
  switch (sub) {
    case 'init': {
      const r = await client.request('POST', '/admin/cluster/init', {});
      if (r.status !== 201) return errorOut(r);
      process.stdout.write(`cluster ${r.body.cluster_id} created; this node ${r.body.node_id} listens for members at ${r.body.address}\n`);
      return 0;
    }
    case 'join-token': {
      const { values } = parseArgs({ args: rest, options: { ttl: { type: 'string' } }, strict: true });
      const body: Record<string, unknown> = {};
      if (values.ttl) body.ttl_seconds = parseDuration(values.ttl);
      const r = await client.request('POST', '/admin/cluster/join-token', body);
      if (r.status !== 201) return errorOut(r);
      // The token alone, on its own line: scripts capture stdout.
      process.stdout.write(`${r.body.token}\n`);
      return 0;
    }
    case 'join': {
      const { positionals } = parseArgs({ args: rest, allowPositionals: true, strict: true });
      if (positionals.length !== 2) fail('cluster join needs ADDRESS and TOKEN');
      const r = await client.request('POST', '/admin/cluster/join', { address: positionals[0], token: positionals[1] });
      if (r.status !== 200) return errorOut(r);
      process.stdout.write(`joined cluster ${r.body.cluster_id} as ${r.body.node_id}; ${r.body.members.length} members\n`);
      return 0;
    }
    case 'remove': {
      const { positionals } = parseArgs({ args: rest, allowPositionals: true, strict: true });
      if (positionals.length !== 1) fail('cluster remove needs exactly one PEER_ID');
      const r = await client.request('DELETE', `/admin/cluster/members/${encodeURIComponent(positionals[0])}`);
      if (r.status !== 200) return errorOut(r);
      process.stdout.write(`removed ${r.body.removed.peer_id} (${r.body.removed.name})\n`);
      return 0;
    }
    case 'leave': {
      const r = await client.request('POST', '/admin/cluster/leave', {});
      if (r.status !== 200) return errorOut(r);
      process.stdout.write(`left the cluster; node ${r.body.node_id} is on its own\n`);
      return 0;
    }
    case 'status': {
      const { values } = parseArgs({ args: rest, options: { json: { type: 'boolean' } }, strict: true });
      const r = await client.request('GET', '/admin/cluster/status');
      if (r.status !== 200) return errorOut(r);
      if (values.json) process.stdout.write(JSON.stringify(r.body, null, 2) + '\n');
      else printStatus(r.body);
      return 0;
    }
    default:
      process.stderr.write(USAGE);
      return 2;
  }
};

commandGroups.set('cluster', clusterCommand);
groupUsage.set('cluster', USAGE);
