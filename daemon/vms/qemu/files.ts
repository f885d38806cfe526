/**
 * Guest files through qemu-guest-agent. Bytes move with guest-file-open,
 * -seek, -read, -write and -close (the path is a JSON argument); what the
 * agent has no command for (stat, a listing, creating parents, removing) is a
 * fixed POSIX script run by guest-exec with the path as a positional
 * parameter, never spliced into the script's text. Everything happens in the
 * guest: no host file is opened whatever the path says, symlinks included
 * (they resolve inside the guest's own filesystem).
 *
 * The scripts answer a refusal with an exit status of their own (44-50),
 * which becomes a GuestPathError for the service to word.
 */
import { EXEC_STREAM_CAP_BYTES, type ExecResult } from '../../lib/exec-output.js';
import { GuestPathError, type GuestDirEntry, type GuestPathInfo } from '../driver.js';
import type { AgentCall } from './exec.js';

/** Runs a fixed script with positional parameters (the driver's exec with `cut: false`). */
export type ScriptRun = (script: string, args: string[]) => Promise<ExecResult>;

/** Bytes per guest-file-write and -read: each a JSON line of the agent protocol, well under its reply bound. */
export const FILE_CHUNK_BYTES = 48 * 1024;

/** How long one of these scripts may take (a recursive remove of a large tree included). */
export const SCRIPT_TIMEOUT_MS = 300_000;

const EXIT: Record<number, GuestPathError['kind']> = {
  44: 'missing',
  45: 'is-directory',
  46: 'not-regular',
  47: 'parent-not-directory',
  50: 'not-empty',
  51: 'no-tool',
};

/** `stat -L` of $1: "%F|%s|%a|%Y" (type words, size, octal mode, mtime seconds). */
export const STAT_SCRIPT = ['[ -e "$1" ] || exit 44', 'exec stat -L -c "%F|%s|%a|%Y" -- "$1"'].join('\n');

/**
 * The entries of directory $1, NUL-terminated "type|size|mode|mtime|name"
 * records of lstat (a symlink is listed as one), at most $2 bytes of them
 * (cut in the guest: the agent's reply stays bounded). GNU find's -printf; a
 * guest without it answers 51.
 */
export const LIST_SCRIPT = [
  '[ -e "$1" ] || exit 44',
  '[ -d "$1" ] || exit 46',
  'find "$1" -maxdepth 0 -printf "" 2>/dev/null || exit 51',
  'find "$1" -mindepth 1 -maxdepth 1 -printf "%y|%s|%m|%T@|%f\\0" | head -c "$2"',
].join('\n');

/**
 * Before a put of $1 with mode $2 (may be empty): refuses a directory or a
 * non-regular file, creates missing parents and the file itself (0644 unless a
 * mode is given), applies the mode.
 */
export const PREPARE_PUT_SCRIPT = [
  'p=$1 m=$2',
  'if [ -e "$p" ] && [ ! -f "$p" ]; then [ -d "$p" ] && exit 45; exit 46; fi',
  'd=${p%/*}; [ -n "$d" ] || d=/',
  'if [ ! -d "$d" ]; then mkdir -p "$d" 2>/dev/null || exit 47; fi',
  'if [ ! -e "$p" ]; then : > "$p" || exit 1; [ -n "$m" ] || m=0644; fi',
  'if [ -n "$m" ]; then chmod "$m" "$p" || exit 1; fi',
].join('\n');

/** Removes $1 (a directory only with $2 = 1, or when empty); prints what it was. */
export const REMOVE_SCRIPT = [
  '[ -e "$1" ] || [ -L "$1" ] || exit 44',
  'if [ -d "$1" ] && [ ! -L "$1" ]; then',
  '  if [ "$2" = 1 ]; then rm -rf -- "$1" || exit 1; else rmdir -- "$1" 2>/dev/null || exit 50; fi',
  '  echo directory',
  'elif [ -L "$1" ]; then rm -f -- "$1" || exit 1; echo symlink',
  'elif [ -f "$1" ]; then rm -f -- "$1" || exit 1; echo file',
  'else rm -f -- "$1" || exit 1; echo other; fi',
].join('\n');

function typeOfStat(words: string): GuestPathInfo['type'] {
  if (words === 'regular file' || words === 'regular empty file') return 'file';
  if (words === 'directory') return 'directory';
  if (words === 'symbolic link') return 'symlink';
  return 'other';
}

function typeOfFind(c: string): GuestPathInfo['type'] {
  return c === 'f' ? 'file' : c === 'd' ? 'directory' : c === 'l' ? 'symlink' : 'other';
}

const mode4 = (octal: string) => octal.padStart(4, '0');
const iso = (seconds: number) => new Date(Math.floor(seconds * 1000)).toISOString();

/** A script's non-zero exit as a GuestPathError (its own codes) or an Error with its stderr. */
function refusal(r: ExecResult, file: string): Error {
  if (r.timed_out) return new Error(`the guest did not finish within ${SCRIPT_TIMEOUT_MS / 1000} s`);
  const kind = r.exit_code === null ? undefined : EXIT[r.exit_code];
  if (kind) return new GuestPathError(kind, file);
  return new Error(`the guest answered exit ${r.exit_code}: ${r.stderr.trim().slice(0, 500)}`);
}

/** Parses "%F|%s|%a|%Y". */
export function parseStat(line: string): GuestPathInfo {
  const [type, size, mode, mtime] = line.trim().split('|');
  return { type: typeOfStat(type), size: Number(size), mode: mode4(mode), mtime: iso(Number(mtime)) };
}

/** Parses find's NUL-terminated records; a record cut by the output cap is dropped. */
export function parseListing(out: string): GuestDirEntry[] {
  const records = out.split('\0');
  // The last piece is empty after a final NUL, or a record the cap cut short.
  records.pop();
  const entries: GuestDirEntry[] = [];
  for (const r of records) {
    const parts = r.split('|');
    if (parts.length < 5) continue;
    const [y, size, mode, mtime] = parts;
    entries.push({ name: parts.slice(4).join('|'), type: typeOfFind(y), size: Number(size), mode: mode4(mode), mtime: iso(Number(mtime)) });
  }
  return entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

export class GuestFiles {
  constructor(
    private readonly call: AgentCall,
    private readonly script: ScriptRun,
  ) {}

  async stat(file: string): Promise<GuestPathInfo> {
    const r = await this.script(STAT_SCRIPT, [file]);
    if (r.exit_code !== 0) throw refusal(r, file);
    return parseStat(r.stdout);
  }

  async list(dir: string): Promise<{ entries: GuestDirEntry[]; truncated: boolean }> {
    const r = await this.script(LIST_SCRIPT, [dir, String(EXEC_STREAM_CAP_BYTES + 1)]);
    if (r.exit_code !== 0) throw refusal(r, dir);
    return { entries: parseListing(r.stdout), truncated: r.truncated };
  }

  async read(file: string, offset: number, length: number): Promise<{ data: Buffer; eof: boolean }> {
    const h = await this.call<number>('guest-file-open', { path: file, mode: 'r' });
    try {
      if (offset > 0) await this.call('guest-file-seek', { handle: h, offset, whence: 'set' });
      const parts: Buffer[] = [];
      let got = 0;
      let eof = false;
      while (got < length && !eof) {
        const r = await this.call<{ count: number; 'buf-b64': string; eof: boolean }>('guest-file-read', {
          handle: h,
          count: Math.min(FILE_CHUNK_BYTES, length - got),
        });
        const b = Buffer.from(r['buf-b64'] ?? '', 'base64');
        parts.push(b);
        got += b.length;
        eof = r.eof || b.length === 0;
      }
      return { data: Buffer.concat(parts, got), eof };
    } finally {
      await this.call('guest-file-close', { handle: h }).catch(() => undefined);
    }
  }

  async put(file: string, data: Buffer, opts: { mode?: string; append: boolean }): Promise<GuestPathInfo> {
    const prep = await this.script(PREPARE_PUT_SCRIPT, [file, opts.mode ?? '']);
    if (prep.exit_code !== 0) throw refusal(prep, file);
    const h = await this.call<number>('guest-file-open', { path: file, mode: opts.append ? 'a' : 'w' });
    try {
      for (let off = 0; off < data.length; off += FILE_CHUNK_BYTES) {
        await this.call('guest-file-write', { handle: h, 'buf-b64': data.subarray(off, off + FILE_CHUNK_BYTES).toString('base64') });
      }
      await this.call('guest-file-flush', { handle: h });
    } finally {
      await this.call('guest-file-close', { handle: h }).catch(() => undefined);
    }
    return this.stat(file);
  }

  async remove(file: string, recursive: boolean): Promise<{ type: GuestPathInfo['type'] }> {
    const r = await this.script(REMOVE_SCRIPT, [file, recursive ? '1' : '0']);
    if (r.exit_code !== 0) throw refusal(r, file);
    const t = r.stdout.trim();
    return { type: t === 'file' || t === 'directory' || t === 'symlink' ? t : 'other' };
  }
}
