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
import { startDaemon } from '../../helpers/daemon.js';
import { crashAt, pausedFolderDaemon, type FolderRound } from '../../helpers/folders-crash.js';
import { headCursor, readerOf, stateEventsNow, type StateEvent } from '../../helpers/state-events.js';

const SCOPES = ['files.read', 'files.manage'];

describe('folders: events of a change killed before its commit', function () {
  this.timeout(120_000);

  interface Round extends FolderRound {
    cursor: string;
  }

  /** A daemon that stops for good at `folders.<step>`, with a folder holding `src/` (two files); the cursor after its making. */
  async function setUp(step: string): Promise<Round> {
    const r = await pausedFolderDaemon(`folders.${step}`, 'evcrash', SCOPES);
    fs.mkdirSync(path.join(r.dir, 'src'));
    for (const n of ['f1', 'f2']) fs.writeFileSync(path.join(r.dir, 'src', n), n);
    return { ...r, cursor: await headCursor(r.d, r.token) };
  }

  const crash = (r: Round, step: string, method: string, url: string, body?: unknown) => crashAt(r, `folders.${step}`, SCOPES, method, url, body);

  const eventsOf = (r: Round): Promise<StateEvent[]> => stateEventsNow(readerOf(r.d, r.token), 'folders', `folders/${r.folderId}`, r.cursor);

  /** Stops and starts the daemon again: nothing more may be reported. */
  async function restart(r: Round): Promise<Round> {
    await r.d.stop();
    const d = await startDaemon({ dataDir: r.dataDir });
    return { ...r, d, token: await d.token('reader2', SCOPES) };
  }

  it('a copy killed after it was put in place: its `changed` event is written at the restart, once, by the caller', async () => {
    let r = await setUp('copy.placed');
    r = await crash(r, 'copy.placed', 'POST', `${API}/folders/${r.folderId}/entries/src/copy`, { dst_sub_path: 'dst' });
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
    r = await crash(r, 'copy', 'POST', `${API}/folders/${r.folderId}/entries/src/copy`, { dst_sub_path: 'dst' });
    expect(fs.existsSync(path.join(r.dir, 'dst'))).to.equal(false);
    expect(await eventsOf(r)).to.deep.equal([]);
    await r.d.stop();
  });

  it('a folder rename killed after its directory was renamed: the record follows and `renamed` is written once', async () => {
    let r = await setUp('rename.renamed');
    r = await crash(r, 'rename.renamed', 'PATCH', `${API}/folders/${r.folderId}`, { new_name: 'evcrash2' });
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
    r = await crash(r, 'subfolder.made', 'POST', `${API}/folders/${r.folderId}/subfolders`, { name: 'made', sub_path: 'src' });
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
