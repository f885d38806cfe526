/**
 * Inside a running sandbox, for the token that owns it: a command (exec) and
 * files by guest path. Everything goes through the VM service's guest agent
 * path (the vms domain's driver); nothing the caller gives reaches a shell on
 * the host, and a guest path only ever names a guest file. The operator
 * (admin socket) reaches every token's sandbox, as `hostctl sandbox exec`
 * always did.
 */
import { badRequest } from '../lib/errors.js';
import { noNotes, type Caller } from '../lib/caller.js';
import { FILE_PIECE_MAX_BYTES as PIECE_MAX } from '../../api/registry/sandboxes.js';
import { O } from './driver.js';
import { inSandboxTerms, type Ctx, type SandboxContext } from './context.js';

export interface ExecArgs {
  command: string;
  timeout_seconds?: number;
  stdin?: string;
  env?: Record<string, string>;
  cwd?: string;
  user?: string;
  encoding?: 'utf8' | 'base64';
}

function decodeBase64(text: string, arg: string): Buffer {
  if (text.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(text)) throw badRequest(`argument '${arg}' must be base64 text`);
  return Buffer.from(text, 'base64');
}

export class SandboxGuest {
  constructor(private readonly c: SandboxContext) {}

  /** POST /sandboxes/{id}/exec: `/bin/sh -c command` in the guest; answers when it ends or is killed at the timeout. */
  async exec(id: string, a: ExecArgs, ctx: Ctx) {
    const encoding = a.encoding ?? 'utf8';
    const input = a.stdin === undefined ? undefined : encoding === 'base64' ? decodeBase64(a.stdin, 'stdin') : Buffer.from(a.stdin, 'utf8');
    if (input && input.length > PIECE_MAX) throw badRequest(`argument 'stdin' must be at most ${PIECE_MAX} bytes`);
    const rec = await this.c.runningFor(id, ctx.caller, 'exec');
    try {
      const { vmid: _v, ...r } = await this.c.vms.exec(rec.vmid, a.command, a.timeout_seconds, noNotes, O, {
        env: a.env ?? {},
        cwd: a.cwd,
        user: a.user,
        input,
        encoding,
      });
      void _v;
      ctx.note({
        summary: `Command run in sandbox ${id} '${rec.name}' ${r.timed_out ? `(timed out after ${a.timeout_seconds ?? 60} s)` : `(exit ${r.exit_code})`}${r.truncated ? ', output cut' : ''}`,
        target: `sandboxes/${id}`,
        // Sizes only: a command, its input and its environment may carry secrets.
        metadata: {
          id,
          exit_code: r.exit_code,
          timed_out: r.timed_out,
          truncated: r.truncated,
          command_bytes: Buffer.byteLength(a.command),
          env_count: Object.keys(a.env ?? {}).length,
          user: a.user ?? null,
        },
      });
      return r;
    } catch (err) {
      throw inSandboxTerms(err, rec);
    }
  }

  /** GET /sandboxes/{id}/files: a piece of a file (base64) or a directory's entries. */
  async get(id: string, a: { path: string; offset?: number; length?: number }, ctx: { caller: Caller }) {
    const rec = await this.c.runningFor(id, ctx.caller, 'reading a file');
    const offset = a.offset ?? 0;
    try {
      const r = await this.c.vms.guestFileGet(rec.vmid, a.path, offset, a.length ?? PIECE_MAX, O);
      const base = { path: a.path, ...r.info, offset };
      if ('entries' in r) return { ...base, content: null, eof: null, entries: r.entries, truncated: r.truncated };
      return { ...base, content: r.content.toString('base64'), eof: r.eof, entries: null, truncated: false };
    } catch (err) {
      throw inSandboxTerms(err, rec);
    }
  }

  /** PUT /sandboxes/{id}/files: writes or appends one piece; the file as it is after. */
  async put(id: string, a: { path: string; content: string; mode?: string; append?: boolean }, ctx: Ctx) {
    const data = decodeBase64(a.content, 'content');
    if (data.length > PIECE_MAX) throw badRequest(`argument 'content' must be at most ${PIECE_MAX} bytes`);
    if (a.path.endsWith('/')) throw badRequest("argument 'path' must name a file, not end with '/'");
    const rec = await this.c.runningFor(id, ctx.caller, 'writing a file');
    try {
      const info = await this.c.vms.guestFilePut(rec.vmid, a.path, data, { mode: a.mode, append: a.append === true }, O);
      ctx.note({
        summary: `File ${a.append ? 'appended to' : 'written'} in sandbox ${id} '${rec.name}' (${data.length} bytes)`,
        target: `sandboxes/${id}`,
        metadata: { id, bytes: data.length, append: a.append === true },
      });
      return { path: a.path, ...info, written: data.length };
    } catch (err) {
      throw inSandboxTerms(err, rec);
    }
  }

  /** DELETE /sandboxes/{id}/files: a file, symlink or directory (recursive only when asked). */
  async remove(id: string, a: { path: string; recursive?: boolean }, ctx: Ctx) {
    if (/^\/+$/.test(a.path)) throw badRequest("argument 'path' must not be the root directory");
    const rec = await this.c.runningFor(id, ctx.caller, 'deleting a file');
    try {
      const r = await this.c.vms.guestFileDelete(rec.vmid, a.path, a.recursive === true, O);
      ctx.note({
        summary: `${r.type === 'directory' ? 'Directory' : 'File'} deleted in sandbox ${id} '${rec.name}'`,
        target: `sandboxes/${id}`,
        metadata: { id, type: r.type, recursive: a.recursive === true },
      });
      return { path: a.path, type: r.type };
    } catch (err) {
      throw inSandboxTerms(err, rec);
    }
  }
}
