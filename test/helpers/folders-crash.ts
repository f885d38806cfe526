/**
 * The folders crash tests' rounds against a real daemon: one that stops for
 * good at a pause step (`HOSTD_TEST_PAUSE_AT`) with a token and an empty
 * managed folder, and a call sent until it stops there, after which the
 * daemon is killed (SIGKILL) and started again on the same data without a
 * pause.
 */
import { expect } from 'chai';
import { API_PREFIX as API } from '../../api/catalog.js';
import { isPauseLine } from '../../daemon/lib/test-pause.js';
import { eventually, startDaemon, tempDir, type TestDaemon } from './daemon.js';

export interface FolderRound {
  d: TestDaemon;
  token: string;
  dataDir: string;
  folderId: string;
  /** The folder's directory on the host. */
  dir: string;
}

/** A daemon that stops for good at `pauseAt` (e.g. `folders.copy`), with a token of `scopes` and an empty folder `name` on the default pool. */
export async function pausedFolderDaemon(pauseAt: string, name: string, scopes: string[]): Promise<FolderRound> {
  const dataDir = tempDir('hostd-folders-crash-');
  const d = await startDaemon({ dataDir, env: { HOSTD_TEST_PAUSE_AT: pauseAt } });
  const token = await d.token('caller', scopes);
  const mk = await d.request('POST', `${API}/folders`, { token, body: { storage_id: 'default', name } });
  expect(mk.status, mk.text).to.equal(201);
  return { d, token, dataDir, folderId: mk.body.folder.folder_id, dir: mk.body.folder.path };
}

/** Sends a call that stops at `pauseAt`, waits for the stop, kills the daemon and starts it again (no pause), with a new token `after` of `scopes`. */
export async function crashAt<R extends FolderRound>(r: R, pauseAt: string, scopes: string[], method: string, url: string, body?: unknown): Promise<R> {
  const pending = r.d.request(method, url, { token: r.token, body }).catch(() => undefined);
  await eventually(() => r.d.logs.some((l) => isPauseLine(l, pauseAt)), 30_000, `the daemon to stop at ${pauseAt}`);
  await r.d.kill();
  await pending;
  const d = await startDaemon({ dataDir: r.dataDir });
  return { ...r, d, token: await d.token('after', scopes) };
}
