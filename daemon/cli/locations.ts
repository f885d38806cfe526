/**
 * `hostctl locations ...`: what the locations domain sees on this host, over
 * the admin socket (the API's /locations operations are reached with
 * `hostctl call`).
 *
 *   locations host-status [--json]   the mount route (kernel CIFS or FUSE) and the programs behind it
 */
import { commandGroups, groupUsage, type Command } from './groups.js';

const USAGE = `usage: hostctl locations <command>

  host-status [--json]         mount route chosen on this host and the SMB programs it uses
`;

export const locationsCommand: Command = async (argv, client) => {
  const [sub, ...rest] = argv;
  if (sub !== 'host-status') {
    process.stderr.write(USAGE);
    return 2;
  }
  const r = await client.request('GET', '/admin/locations/host-status');
  if (r.status !== 200) {
    process.stderr.write(`hostctl: ${r.body?.error ?? `status ${r.status}`}\n`);
    return 1;
  }
  if (rest.includes('--json')) {
    process.stdout.write(JSON.stringify(r.body, null, 2) + '\n');
    return 0;
  }
  const b = r.body as {
    mount_route: string | null;
    route_reason: string;
    runtimes: Array<{ name: string; version: string | null; available: boolean; reason: string | null }>;
  };
  process.stdout.write(`mount route: ${b.mount_route ?? 'none'} (${b.route_reason})\n`);
  for (const x of b.runtimes) {
    process.stdout.write(`  ${x.available ? 'ok     ' : 'missing'}  ${x.name}${x.version ? ` ${x.version}` : ''}${x.reason ? `: ${x.reason}` : ''}\n`);
  }
  return 0;
};

commandGroups.set('locations', locationsCommand);
groupUsage.set('locations', USAGE);
