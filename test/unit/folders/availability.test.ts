/**
 * The folders domain's one runtime, procfs, asked the house's way: the
 * driver reports it in availability(), and an operation that touches the disk
 * is 503 naming it (asked again fresh first) before any call reaches the
 * driver; an operation answered from memory (folders_list) is not.
 */
import { expect } from 'chai';
import { FoldersContext } from '../../../daemon/folders/context.js';
import { PROCFS, type FilesDriver } from '../../../daemon/folders/driver.js';
import { createFolder, listFolders } from '../../../daemon/folders/folders.js';
import { contentsList } from '../../../daemon/folders/contents.js';
import type { FolderIntent, FolderRecords } from '../../../daemon/folders/records.js';
import { missing } from '../../../daemon/lib/availability.js';
import { ApiError } from '../../../daemon/lib/errors.js';
import type { IntentRecovery } from '../../../daemon/lib/recovery.js';

const REASON = 'the folders domain needs /proc mounted';

/** A driver without procfs: availability says so; any other method records that it was reached. */
function noProcDriver(reached: string[], asked: Array<boolean | undefined>): FilesDriver {
  return new Proxy({} as FilesDriver, {
    get: (_t, name: string) =>
      name === 'availability'
        ? async (opts?: { fresh?: boolean }) => {
            asked.push(opts?.fresh);
            return [missing(PROCFS, REASON)];
          }
        : async () => {
            reached.push(name);
            throw new Error(`driver.${name} reached`);
          },
  });
}

const folder = { folder_id: 'f_1', name: 'media', storage_id: 'p', path: '/pool/media', created_at: '2026-11-25T00:00:00.000Z' };
const records = {
  all: () => [folder],
  get: (id: string) => (id === folder.folder_id ? folder : undefined),
  findByName: () => undefined,
} as unknown as FolderRecords;
const recovery = { pending: () => [], retry: async () => ({ settled: 0, pending: [] }) } as unknown as IntentRecovery<FolderIntent>;

async function status(p: Promise<unknown>): Promise<[number, string]> {
  try {
    await p;
    return [200, ''];
  } catch (err) {
    expect(err).to.be.instanceOf(ApiError);
    return [(err as ApiError).status, (err as ApiError).message];
  }
}

describe('folders: procfs through the driver (503 before the disk)', () => {
  it('answers 503 naming procfs for operations that touch the disk, before the driver is reached; the list still answers', async () => {
    const reached: string[] = [];
    const asked: Array<boolean | undefined> = [];
    const c = new FoldersContext({ records, driver: noProcDriver(reached, asked), pools: [{ id: 'p', path: '/pool' }], pause: async () => {}, recovery });
    expect(await status(createFolder(c, { storage_id: 'p', name: 'new' }))).to.deep.equal([503, `${PROCFS} is not available: ${REASON}`]);
    expect(await status(contentsList(c, { folder_id: 'f_1' }))).to.deep.equal([503, `${PROCFS} is not available: ${REASON}`]);
    expect(asked, 'asked from the cache, then fresh, before refusing').to.deep.equal([undefined, true, undefined, true]);
    expect(reached).to.deep.equal([]);
    expect((await listFolders(c)).folders).to.deep.equal([folder]);
  });
});
