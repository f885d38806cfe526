/**
 * The FUSE route: one smbnetfs per location, mounted on the location's mount
 * directory; the share is `<mount>/<host>/<share>` inside it.
 *
 * Credentials: smbnetfs reads them from its config file. hostd hands that
 * file over through a FIFO (mode 0600, in a 0700 directory) that it writes
 * while smbnetfs reads it, so the password never lands on a disk, and removes
 * the FIFO once smbnetfs has mounted. `config_update_period 0` keeps smbnetfs
 * from reading the (then missing) file again, so it keeps the credentials it
 * read in memory for its whole life.
 */
import crypto from 'node:crypto';
import { constants as FS } from 'node:fs';
import fs from 'node:fs/promises';
import path from 'node:path';
import { ApiError, badGateway, internal } from '../../lib/errors.js';
import { ProgramError, run, stderrTail } from '../../lib/run.js';
import { availableAs, missing, type Availability } from '../../lib/availability.js';
import { scrub } from '../addresses.js';
import type { MaybeCredentials, Remote } from '../driver.js';
import { mountAt, releaseMount } from './mounts.js';
import type { RouteDriver } from './route.js';

const INSTALL = 'the smbnetfs and fuse3 packages';

/** A double-quoted string for smbnetfs's config (it reads \" and \\ as escapes). */
export function smbnetfsQuote(s: string): string {
  return `"${s.replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
}

/** smbnetfs's config for one share: no browsing, no keyring, no config re-reads, no stat tricks. */
export function smbnetfsConfig(remote: Remote, creds: MaybeCredentials, smbTimeoutMs: number): string {
  const user = creds ? (creds.domain ? `${creds.domain}/${creds.user}` : creds.user) : 'guest';
  return [
    'config_update_period 0',
    'smb_query_browsers "false"',
    'use_libsecret "false"',
    // The default hides '.git', 'HEAD', '.directory' and 'Desktop.ini' from stat(): not on a file share.
    'stat_workaround_depth 0',
    'stat_workaround_enable_default_entries "false"',
    'show_$_shares "true"',
    `smb_timeout ${Math.max(1000, Math.round(smbTimeoutMs))}`,
    `auth ${smbnetfsQuote(`${remote.host}/${remote.share}`)} ${smbnetfsQuote(user)} ${smbnetfsQuote(creds?.password ?? '')}`,
    '',
  ].join('\n');
}

export class SmbnetfsRoute implements RouteDriver {
  readonly route = 'fuse' as const;

  constructor(private readonly smbTimeoutMs = 10_000) {}

  async availability(): Promise<Availability[]> {
    const list: Availability[] = [];
    try {
      const r = await run('smbnetfs', ['-V'], { timeoutMs: 10_000, install: INSTALL, okCodes: [0, 1], env: { HOME: '/nonexistent' } });
      const v = /SMBNetFS version (\S+)/.exec(`${r.stdout}\n${r.stderr}`)?.[1] ?? null;
      list.push(availableAs('smbnetfs', v));
    } catch (err) {
      list.push(missing('smbnetfs', err instanceof ApiError && err.status === 503 ? `smbnetfs is not installed (install ${INSTALL})` : (err as Error).message));
    }
    try {
      await fs.access('/dev/fuse', FS.R_OK | FS.W_OK);
      list.push(availableAs('/dev/fuse', null));
    } catch {
      list.push(missing('/dev/fuse', 'the FUSE device /dev/fuse is missing (load the fuse module, or give the container /dev/fuse)'));
    }
    return list;
  }

  shareRoot(dir: string, remote: Remote): string {
    return path.join(dir, remote.host, remote.share);
  }

  async mount(remote: Remote, creds: MaybeCredentials, dir: string, work: string): Promise<void> {
    // smbnetfs (through libsmbclient) wants $HOME/.smb; it holds no secret.
    await fs.mkdir(path.join(work, '.smb'), { recursive: true, mode: 0o700 });
    await fs.writeFile(path.join(work, '.smb', 'smb.conf'), '# written by hostd: libsmbclient settings for smbnetfs (defaults)\n[global]\n', { mode: 0o600 });
    const fifo = path.join(work, `config-${crypto.randomBytes(6).toString('hex')}`);
    await run('mkfifo', ['-m', '600', fifo], { timeoutMs: 10_000 });
    const secret = creds?.password;
    try {
      let settled = false;
      const mounting = run('smbnetfs', [dir, '-o', `config=${fifo}`], {
        env: { HOME: work, LC_ALL: 'C' },
        timeoutMs: 30_000,
        install: INSTALL,
      }).finally(() => (settled = true));
      const feeding = feed(fifo, smbnetfsConfig(remote, creds, this.smbTimeoutMs), () => settled);
      try {
        await Promise.all([mounting, feeding]);
      } catch (err) {
        if (err instanceof ProgramError)
          throw badGateway(`smbnetfs could not mount //${remote.host}/${remote.share}: ${scrub(stderrTail(err.stderr || err.message, 300), secret)}`);
        throw err;
      }
    } finally {
      await fs.rm(fifo, { force: true });
    }
    const m = await mountAt(dir);
    if (!m || !m.fsType.startsWith('fuse')) {
      await releaseMount(dir);
      throw internal(`smbnetfs exited without mounting ${dir}`);
    }
  }
}

/** Writes `text` into the FIFO once its reader has opened it; gives up when the reader finished without opening it. */
async function feed(fifo: string, text: string, readerDone: () => boolean): Promise<void> {
  for (;;) {
    let fh: fs.FileHandle | null = null;
    try {
      // Non-blocking: ENXIO until smbnetfs opens the other end, so no thread waits on a reader that never comes.
      fh = await fs.open(fifo, FS.O_WRONLY | FS.O_NONBLOCK);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENXIO') throw err;
    }
    if (fh) {
      try {
        await fh.write(text); // far below the pipe's buffer: one atomic write
      } finally {
        await fh.close();
      }
      return;
    }
    if (readerDone()) return;
    await new Promise((r) => setTimeout(r, 10));
  }
}
