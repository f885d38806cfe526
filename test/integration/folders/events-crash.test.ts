/**
 * `folders.state` events across a kill -9 between a change on disk and its
 * commit (HOSTD_TEST_PAUSE_AT stops the daemon there for good; the test
 * kills it and starts it again on the same data dir): a change the restart
 * finds made has its event written then, once, named by the caller and
 * marked `found-at-open`; a change the restart undoes has none; a second
 * restart adds nothing. The events are read through `events_list` from a
 * cursor taken before the call.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { API_PREFIX as API } from '../../../api/catalog.js';
import { isPauseLine } from '../../../daemon/lib/test-pause.js';
import { eventually, startDaemon, tempDir, type TestDaemon } from '../../helpers/daemon.js';
import { headCursor, readerOf, stateEventsNow, type StateEvent } from '../../helpers/state-events.js';

const SCOPES = ['files.read', 'files.manage'];

describe('folders: events of a change killed before its commit', function () {
  this.timeout(120_000);

  interface Round {
    d: TestDaemon;
    token: string;
    dataDir: string;
    folderId: string;
    dir: string;
    cursor: string;
  }

  /** A daemon that stops for good at `folders.<step>`, with a folder holding `src/` (two files); the cursor after its making. */
  async function setUp(step: string): Promise<Round> {
    const dataDir = tempDir('hostd-folders-evcrash-');
    const d = await startDaemon({ dataDir, env: { HOSTD_TEST_PAUSE_AT: `folders.${step}` } });
    const token = await d.token('caller', SCOPES);
    const mk = await d.request('POST', `${API}/folders`, { token, body: { storage_id: 'default', name: 'evcrash' } });
    expect(mk.status, mk.text).to.equal(201);
    const dir = mk.body.folder.path as string;
    fs.mkdirSync(path.join(dir, 'src'));
    for (const n of ['f1', 'f2']) fs.writeFileSync(path.join(dir, 'src', n), n);
    return { d, token, dataDir, folderId: mk.body.folder.folder_id, dir, cursor: await headCursor(d, token) };
  }

  /** Sends a call that stops at the step, kills the daemon there and starts it again (no pause). */
  async function crashAt(r: Round, step: string, method: string, url: string, body?: unknown): Promise<Round> {
    const pending = r.d.request(method, url, { token: r.token, body }).catch(() => undefined);
    await eventually(() => r.d.logs.some((l) => isPauseLine(l, `folders.${step}`)), 30_000, `the daemon to stop at ${step}`);
    await r.d.kill();
    await pending;
    const d = await startDaemon({ dataDir: r.dataDir });
    return { ...r, d, token: await d.token('reader', SCOPES) };
  }

  const eventsOf = (r: Round): Promise<StateEvent[]> => stateEventsNow(readerOf(r.d, r.token), 'folders', `folders/${r.folderId}`, r.cursor);

  /** Stops and starts the daemon again: nothing more may be reported. */
  async function restart(r: Round): Promise<Round> {
    await r.d.stop();
    const d = await startDaemon({ dataDir: r.dataDir });
    return { ...r, d, token: await d.token('reader2', SCOPES) };
  }

  it('a copy killed after it was put in place: its `changed` event is written at the restart, once, by the caller', async () => {
    let r = await setUp('copy.placed');
    r = await crashAt(r, 'copy.placed', 'POST', `${API}/folders/${r.folderId}/entries/src/copy`, { dst_sub_path: 'dst' });
    expect(fs.readdirSync(path.join(r.dir, 'dst')).sort()).to.deep.equal(['f1', 'f2']);
    const evs = await eventsOf(r);
    expect(evs.map((e) => [e.data.state, e.data.operation, e.data.sub_path, e.data.reason, e.actor])).to.deep.equal([
      ['changed', 'folders_entries_copy', 'dst', 'found-at-open', 'caller'],
    ]);
    r = await restart(r);
    expect(await eventsOf(r)).to.have.length(1);
    await r.d.stop();
  });

  it('a copy killed half-way is undone at the restart, and reports nothing', async () => {
    let r = await setUp('copy');
    r = await crashAt(r, 'copy', 'POST', `${API}/folders/${r.folderId}/entries/src/copy`, { dst_sub_path: 'dst' });
    expect(fs.existsSync(path.join(r.dir, 'dst'))).to.equal(false);
    expect(await eventsOf(r)).to.deep.equal([]);
    await r.d.stop();
  });

  it('a folder rename killed after its directory was renamed: the record follows and `renamed` is written once', async () => {
    let r = await setUp('rename.renamed');
    r = await crashAt(r, 'rename.renamed', 'PATCH', `${API}/folders/${r.folderId}`, { new_name: 'evcrash2' });
    const list = await r.d.request('GET', `${API}/folders`, { token: r.token });
    expect(list.body.folders.find((f: { folder_id: string }) => f.folder_id === r.folderId)).to.include({ name: 'evcrash2' });
    const evs = await eventsOf(r);
    expect(evs.map((e) => [e.data.state, e.data.name, e.data.reason, e.actor])).to.deep.equal([['renamed', 'evcrash2', 'found-at-open', 'caller']]);
    r = await restart(r);
    expect(await eventsOf(r)).to.have.length(1);
    await r.d.stop();
  });

  it('a subfolder create killed after the folder was made: kept, and its event written once', async () => {
    let r = await setUp('subfolder.made');
    r = await crashAt(r, 'subfolder.made', 'POST', `${API}/folders/${r.folderId}/subfolders`, { name: 'made', sub_path: 'src' });
    expect(fs.statSync(path.join(r.dir, 'src', 'made')).isDirectory()).to.equal(true);
    const evs = await eventsOf(r);
    expect(evs.map((e) => [e.data.state, e.data.operation, e.data.sub_path, e.data.reason, e.actor])).to.deep.equal([
      ['changed', 'folders_subfolders_create', 'src', 'found-at-open', 'caller'],
    ]);
    r = await restart(r);
    expect(await eventsOf(r)).to.have.length(1);
    await r.d.stop();
  });
});
