/**
 * `hostctl console`: prints a one-time sign-in URL for the web console, alone
 * on one line of stdout (so that a script can take it as is); what it is
 * for goes to stderr. The link works once, for 10 minutes.
 */
import { commandGroups, groupUsage, type Command } from './groups.js';

const USAGE = `usage: hostctl console

  prints a one-time sign-in URL for the web console (single use, valid 10 minutes)
`;

export const consoleCommand: Command = async (argv, client) => {
  if (argv.length) {
    process.stderr.write(USAGE);
    return argv[0] === '--help' || argv[0] === '-h' ? 0 : 2;
  }
  const r = await client.request('POST', '/admin/console/sign-in');
  if (r.status !== 201) {
    process.stderr.write(`hostctl: ${r.body?.error ?? `status ${r.status}`}\n`);
    return 1;
  }
  process.stdout.write(`${r.body.url}\n`);
  process.stderr.write(`Open this link in a browser to sign in as the administrator; it works once, until ${r.body.expires_at}.\n`);
  return 0;
};

commandGroups.set('console', consoleCommand);
groupUsage.set('console', USAGE);
