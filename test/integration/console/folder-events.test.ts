/**
 * Folder changes as `folders.state` events (what keeps the console's Folders
 * page live for a token with `files.read` alone, which reads no activity
 * row): one event per folder a change touched, named by the caller, and
 * none for a read or a refused call, nor for a token without `files.read`.
 */
import { expect } from 'chai';
import { startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { API } from '../../helpers/conformance.js';

describe('folders.state events', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  let reader: string;
  let writer: string;
  let other: string;

  before(async () => {
    d = await startDaemon();
    reader = await d.token('fe-reader', ['files.read']);
    writer = await d.token('fe-writer', ['files.manage', 'files.read']);
    other = await d.token('fe-vms', ['vm.read']);
  });

  const call = async (method: string, p: string, body?: unknown) => {
    const r = await d.request(method, `${API}${p}`, { token: writer, body });
    expect(r.status, r.text).to.be.within(200, 299);
    return r.body;
  };
  /** Every event `token` may read after `cursor` (one page; the tests write far fewer). */
  const eventsAfter = async (token: string, cursor: string | undefined, types = 'folders.') => {
    const q = new URLSearchParams({ types, limit: '1000', ...(cursor ? { cursor } : {}) });
    const r = await d.request('GET', `${API}/events?${q}`, { token });
    expect(r.status, r.text).to.equal(200);
    return r.body as { events: any[]; next_cursor: string };
  };
  const head = async (token: string) => (await eventsAfter(token, undefined)).next_cursor;

  it('a folder made, changed inside, renamed and deleted: one event each, to a files.read token, named by the caller', async () => {
    const from = await head(reader);
    const { folder } = await call('POST', '/folders', { storage_id: 'default', name: 'fe-one' });
    const id = folder.folder_id;
    await call('POST', `/folders/${id}/subfolders`, { name: 'a', sub_path: '' });
    await call('POST', `/folders/${id}/entries/a/copy`, { dst_sub_path: 'b' });
    await call('DELETE', `/folders/${id}/entries/b`);
    await call('PATCH', `/folders/${id}`, { new_name: 'fe-two' });
    // Reads and refusals change nothing and report nothing.
    await call('GET', `/folders/${id}/contents`);
    expect((await d.request('POST', `${API}/folders`, { token: writer, body: { storage_id: 'default', name: 'fe-two' } })).status).to.equal(409);
    await call('DELETE', `/folders/${id}`);

    const { events } = await eventsAfter(reader, from);
    expect(events.map((e) => [e.type, e.resource, e.data.state, e.data.operation, e.actor])).to.deep.equal([
      ['folders.state', `folders/${id}`, 'created', 'folders_create', 'fe-writer'],
      ['folders.state', `folders/${id}`, 'changed', 'folders_subfolders_create', 'fe-writer'],
      ['folders.state', `folders/${id}`, 'changed', 'folders_entries_copy', 'fe-writer'],
      ['folders.state', `folders/${id}`, 'changed', 'folders_entries_delete', 'fe-writer'],
      ['folders.state', `folders/${id}`, 'renamed', 'folders_update', 'fe-writer'],
      ['folders.state', `folders/${id}`, 'deleted', 'folders_delete', 'fe-writer'],
    ]);
    expect(events[0].data).to.include({ folder_id: id, name: 'fe-one' });
    expect(events[1].data).to.include({ sub_path: '' });
    expect(events[4].data).to.include({ name: 'fe-two' });
  });

  it('a copy into another folder reports the destination, a move inside one folder reports it once; a token without files.read gets none', async () => {
    const fromOther = await head(other);
    const a = (await call('POST', '/folders', { storage_id: 'default', name: 'fe-src' })).folder.folder_id;
    const b = (await call('POST', '/folders', { storage_id: 'default', name: 'fe-dst' })).folder.folder_id;
    await call('POST', `/folders/${a}/subfolders`, { name: 'x', sub_path: '' });
    const fromReader = await head(reader);
    await call('POST', `/folders/${a}/entries/x/copy`, { dst_folder_id: b });
    await call('PATCH', `/folders/${a}/entries/x`, { dst_sub_path: 'y' });

    const { events } = await eventsAfter(reader, fromReader);
    expect(events.map((e) => [e.resource, e.data.state, e.data.operation])).to.deep.equal([
      [`folders/${b}`, 'changed', 'folders_entries_copy'],
      [`folders/${a}`, 'changed', 'folders_entries_move'],
    ]);
    expect((await eventsAfter(other, fromOther)).events).to.deep.equal([]);
    await call('DELETE', `/folders/${a}`);
    await call('DELETE', `/folders/${b}`);
  });
});
