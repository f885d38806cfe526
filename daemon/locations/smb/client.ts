/**
 * smbclient: the probe before a mount (so a wrong password, a missing share
 * or a host that cannot be reached gives an error naming which), and the
 * share list of one host. The password goes in on stdin (smbclient reads it
 * from the descriptor named by PASSWD_FD), never on the command line or on
 * disk; the user name (not a secret) is an argument.
 */
import { ApiError } from '../../lib/errors.js';
import { ProgramError, run, stderrTail } from '../../lib/run.js';
import { availableAs, missing, type Availability } from '../../lib/availability.js';
import { scrub } from '../addresses.js';
import type { MaybeCredentials, ProbeOptions, Remote, ShareEntry } from '../driver.js';
import { classifySmbclient, parseShareList, smbError } from './status.js';

const INSTALL = 'the smbclient package';

export class Smbclient {
  constructor(private readonly timeoutMs = 15_000) {}

  async availability(): Promise<Availability> {
    try {
      const r = await run('smbclient', ['--version'], { timeoutMs: 10_000, install: INSTALL });
      return availableAs('smbclient', r.stdout.trim().replace(/^Version\s+/, '') || null);
    } catch (err) {
      return missing('smbclient', err instanceof ApiError && err.status === 503 ? `smbclient is not installed (install ${INSTALL})` : (err as Error).message);
    }
  }

  /** Logs in and connects to the share; throws the classified error. */
  async check(remote: Remote, creds: MaybeCredentials, opts: ProbeOptions = {}): Promise<void> {
    const args = [`//${remote.host}/${remote.share}`, ...credentialArgs(creds), '-c', 'volume'];
    if (opts.ip) args.push('-I', opts.ip);
    await this.call(args, creds, remote.host, remote.share, opts.signal);
  }

  /** The shares of one host (disk shares first, then the rest, by name). */
  async shares(host: string, creds: MaybeCredentials, opts: ProbeOptions = {}): Promise<ShareEntry[]> {
    const args = ['-L', `//${host}`, '-g', ...credentialArgs(creds)];
    if (opts.ip) args.push('-I', opts.ip);
    const out = await this.call(args, creds, host, null, opts.signal);
    const order = { disk: 0, printer: 1, other: 2, ipc: 3 } as const;
    return parseShareList(out).sort((a, b) => order[a.type] - order[b.type] || a.name.localeCompare(b.name));
  }

  private async call(args: string[], creds: MaybeCredentials, host: string, share: string | null, signal?: AbortSignal): Promise<string> {
    const secret = creds?.password;
    let r;
    try {
      r = await run('smbclient', args, {
        input: creds ? `${creds.password}\n` : '',
        timeoutMs: this.timeoutMs,
        signal,
        install: INSTALL,
        // Exit 1 is a refusal to classify: smbclient prints the NT status on stdout or stderr.
        okCodes: [0, 1],
        // No user smb.conf lookups under $HOME, no translated messages to parse.
        env: { LC_ALL: 'C', HOME: '/nonexistent', ...(creds ? { PASSWD_FD: '0' } : {}) },
      });
    } catch (err) {
      if (err instanceof ProgramError) {
        const f = classifySmbclient(`${err.stderr}\n${err.message}`, creds === null);
        throw smbError(f, host, share, scrub(stderrTail(err.stderr || err.message, 200), secret));
      }
      if (err instanceof ApiError) throw new ApiError(err.status, scrub(err.message, secret));
      throw err;
    }
    if (r.code !== 0) {
      const output = `${r.stdout}\n${r.stderr}`;
      throw smbError(classifySmbclient(output, creds === null), host, share, scrub(stderrTail(output, 200), secret));
    }
    return r.stdout;
  }
}

/** Who logs in: guest is the user `guest` with no password, as smbnetfs logs in, so probe and mount agree. */
export function credentialArgs(creds: MaybeCredentials): string[] {
  if (!creds) return ['-U', 'guest', '-N'];
  return ['-U', creds.user, ...(creds.domain ? ['-W', creds.domain] : [])];
}
