/**
 * The kernel route: `mount -t cifs` (cifs-utils' mount.cifs) with the
 * credentials in a `credentials=` file (0600, in a 0700 directory, removed as
 * soon as mount returns): never on the command line.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ApiError, badGateway, badRequest, notFound, unavailable } from '../../lib/errors.js';
import { ProgramError, run, stderrTail } from '../../lib/run.js';
import { availableAs, missing, type Availability } from '../../lib/availability.js';
import { scrub } from '../addresses.js';
import type { Credentials, MaybeCredentials, Remote } from '../driver.js';
import { mountAt } from './mounts.js';
import type { RouteDriver } from './route.js';

const INSTALL = 'the cifs-utils package';

/** The kernel client's `credentials=` file. */
export function cifsCredentialsFile(c: Credentials): string {
  return `username=${c.user}\npassword=${c.password}\n${c.domain ? `domain=${c.domain}\n` : ''}`;
}

/** Whether the running kernel can mount cifs: built in, loaded, or a module it can load on demand. */
export async function kernelHasCifs(): Promise<{ ok: boolean; how: string }> {
  try {
    const fsList = await fs.readFile('/proc/filesystems', 'utf8');
    if (/\t(cifs|smb3)$/m.test(fsList)) return { ok: true, how: 'cifs is registered in /proc/filesystems' };
  } catch {
    /* no /proc: fall through */
  }
  const rel = os.release();
  for (const sub of ['kernel/fs/smb/client', 'kernel/fs/cifs']) {
    try {
      const names = await fs.readdir(path.join('/lib/modules', rel, sub));
      if (names.some((n) => /^cifs\.ko(\.(xz|zst|gz))?$/.test(n))) return { ok: true, how: `module cifs for ${rel}` };
    } catch {
      /* not there */
    }
  }
  return { ok: false, how: `kernel ${rel} has no cifs filesystem (not in /proc/filesystems, no cifs module in /lib/modules/${rel})` };
}

/** What a mount.cifs failure means, from its `mount error(N)` line. */
export function classifyMountError(stderr: string, remote: Remote, guest: boolean): ApiError {
  const code = Number(/mount error\((\d+)\)/.exec(stderr)?.[1] ?? NaN);
  const detail = stderrTail(stderr, 200);
  switch (code) {
    case 13:
    case 1:
      return guest
        ? badRequest(`SMB host '${remote.host}' refused guest access to //${remote.host}/${remote.share}; give 'username' and 'password'`)
        : badRequest(`SMB host '${remote.host}' rejected the 'username' and 'password' (${detail})`);
    case 2:
      return notFound(`share '${remote.share}' does not exist on SMB host '${remote.host}' (${detail})`);
    case 19:
      return unavailable(`the kernel has no cifs filesystem (${detail})`);
    case 110:
    case 111:
    case 112:
    case 113:
    case 115:
    case 101:
      return badGateway(`cannot reach SMB host '${remote.host}' (${detail})`);
    default:
      return badGateway(`mount.cifs failed for //${remote.host}/${remote.share}: ${detail}`);
  }
}

export class KernelCifsRoute implements RouteDriver {
  readonly route = 'cifs' as const;

  async availability(): Promise<Availability[]> {
    const list: Availability[] = [];
    const k = await kernelHasCifs();
    list.push(k.ok ? availableAs('kernel cifs', os.release()) : missing('kernel cifs', k.how));
    try {
      const r = await run('mount.cifs', ['-V'], { timeoutMs: 10_000, install: INSTALL });
      list.push(availableAs('mount.cifs', /(\d+(\.\d+)+)/.exec(r.stdout)?.[1] ?? null));
    } catch (err) {
      list.push(
        missing('mount.cifs', err instanceof ApiError && err.status === 503 ? `mount.cifs is not installed (install ${INSTALL})` : (err as Error).message),
      );
    }
    return list;
  }

  shareRoot(dir: string): string {
    return dir;
  }

  async mount(remote: Remote, creds: MaybeCredentials, dir: string, work: string): Promise<void> {
    const opts = ['uid=0', 'gid=0', 'file_mode=0640', 'dir_mode=0750', 'nosuid', 'nodev', 'noexec'];
    let credFile: string | null = null;
    if (creds) {
      credFile = path.join(work, `credentials-${crypto.randomBytes(6).toString('hex')}`);
      await fs.writeFile(credFile, cifsCredentialsFile(creds), { mode: 0o600, flag: 'wx' });
      opts.push(`credentials=${credFile}`);
    } else {
      opts.push('guest');
    }
    try {
      await run('mount', ['-t', 'cifs', `//${remote.host}/${remote.share}`, dir, '-o', opts.join(',')], {
        timeoutMs: 60_000,
        env: { LC_ALL: 'C' },
        install: INSTALL,
      });
    } catch (err) {
      if (err instanceof ProgramError) throw classifyMountError(scrub(`${err.stderr}\n${err.message}`, creds?.password), remote, creds === null);
      throw err;
    } finally {
      if (credFile) await fs.rm(credFile, { force: true });
    }
    if (!(await mountAt(dir))) throw badGateway(`mount.cifs returned but nothing is mounted on ${dir}`);
  }
}
