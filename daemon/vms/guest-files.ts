/**
 * Files of a running guest by path, through its agent (the driver's
 * GuestFileDriver): what the sandboxes domain's file operations use. Nothing
 * here touches a host file: the path is the guest's, resolved in the guest.
 */
import { type ApiError, conflict, notFound, unavailable } from '../lib/errors.js';
import { GuestPathError, type GuestDirEntry, type GuestFileDriver, type GuestPathInfo } from './driver.js';
import { agentFailure, type OwnerOpts, type VmContext } from './context.js';

export type GuestFileGet =
  | { info: GuestPathInfo & { type: 'file' }; content: Buffer; eof: boolean }
  | { info: GuestPathInfo & { type: 'directory' }; entries: GuestDirEntry[]; truncated: boolean };

/** A refusal of the guest in the VM's words (the sandboxes domain rewords "VM N"). */
export function guestPathFailure(vmid: number, err: unknown): ApiError {
  if (!(err instanceof GuestPathError)) return agentFailure(vmid, err);
  const p = err.path;
  switch (err.kind) {
    case 'missing':
      return notFound(`file '${p}' not found in VM ${vmid}`);
    case 'is-directory':
      return conflict(`'${p}' is a directory in VM ${vmid}: only a file can be written`);
    case 'not-regular':
      return conflict(`'${p}' in VM ${vmid} is neither a regular file nor a directory`);
    case 'parent-not-directory':
      return conflict(`a parent of '${p}' in VM ${vmid} is not a directory`);
    case 'not-empty':
      return conflict(`directory '${p}' in VM ${vmid} is not empty: delete it with recursive: true to remove its contents too`);
    case 'no-tool':
      return unavailable(`the guest of VM ${vmid} has no GNU find, which listing a directory needs`);
  }
}

export class VmGuestFiles {
  constructor(private readonly c: VmContext) {}

  private async running(vmid: number, o: OwnerOpts, what: string): Promise<GuestFileDriver> {
    const rec = await this.c.vm(vmid, o);
    await this.c.requireRunning(rec, what);
    await this.c.identitySet(vmid);
    const files = this.c.e.files;
    if (!files) throw unavailable('guest files are not available with this VM driver');
    return files;
  }

  /** A regular file's bytes (`length` at `offset`) or a directory's entries; anything else is 409. */
  async guestFileGet(vmid: number, file: string, offset: number, length: number, o: OwnerOpts = {}): Promise<GuestFileGet> {
    const files = await this.running(vmid, o, 'reading a file');
    const ref = this.c.ref(vmid);
    try {
      const info = await files.stat(ref, file);
      if (info.type === 'directory') {
        const l = await files.list(ref, file);
        return { info: { ...info, type: 'directory' }, entries: l.entries, truncated: l.truncated };
      }
      if (info.type !== 'file') throw new GuestPathError('not-regular', file);
      const r = await files.read(ref, file, offset, length);
      return { info: { ...info, type: 'file' }, content: r.data, eof: r.eof || offset + r.data.length >= info.size };
    } catch (err) {
      throw guestPathFailure(vmid, err);
    }
  }

  /** Writes (or appends to) a file, making it and its parents when missing; the file as it is after. */
  async guestFilePut(vmid: number, file: string, data: Buffer, opts: { mode?: string; append: boolean }, o: OwnerOpts = {}): Promise<GuestPathInfo> {
    const files = await this.running(vmid, o, 'writing a file');
    try {
      return await files.put(this.c.ref(vmid), file, data, opts);
    } catch (err) {
      throw guestPathFailure(vmid, err);
    }
  }

  /** Removes a file, symlink or (empty, or with `recursive`) directory. */
  async guestFileDelete(vmid: number, file: string, recursive: boolean, o: OwnerOpts = {}): Promise<{ type: GuestPathInfo['type'] }> {
    const files = await this.running(vmid, o, 'deleting a file');
    try {
      return await files.remove(this.c.ref(vmid), file, recursive);
    } catch (err) {
      throw guestPathFailure(vmid, err);
    }
  }
}
