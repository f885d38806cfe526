/**
 * A state event in the same store batch as the change it reports
 * (`writeWithState`, daemon/events/state.ts): both land together, or, when
 * the batch fails, neither (the event's seq is a gap, never an event without
 * its change); the event reaches only who its ACL names.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { Store } from '../../../daemon/store/store.js';
import { EventLog } from '../../../daemon/events/log.js';
import { DEFAULT_EVENT_SETTINGS } from '../../../daemon/events/settings.js';
import { eventsPort, writeWithState } from '../../../daemon/events/state.js';
import type { EventsPort } from '../../../daemon/domain.js';
import { tempDir } from '../../helpers/daemon.js';

describe('state events in the batch of their change', function () {
  let dir: string;
  let store: Store;
  let log: EventLog;

  beforeEach(async () => {
    dir = tempDir('hostd-state-batch-');
    store = await Store.open(path.join(dir, 'db'));
    log = new EventLog(store, 'n1', DEFAULT_EVENT_SETTINGS);
    await log.init();
  });

  afterEach(async () => {
    await store.close().catch(() => undefined);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('writes the change and its event together, the event released after', async function () {
    const recs = store.sub<{ state: string }>('recs');
    const seen: string[] = [];
    log.listen((e) => seen.push(`${e.type} ${e.resource} ${String(e.data.state)}`));
    await writeWithState(eventsPort(log), store, [{ type: 'put', sub: recs, key: 'sbx-1', value: { state: 'running' } }], {
      domain: 'sandboxes',
      resource: 'sandboxes/sbx-1',
      state: 'running',
      data: { id: 'sbx-1' },
      actor: 'alice',
      owner: 'tok_1',
    });
    expect(await recs.get('sbx-1')).to.deep.equal({ state: 'running' });
    const [e] = await log.read(0, 10);
    expect(e).to.include({ type: 'sandboxes.state', resource: 'sandboxes/sbx-1', actor: 'alice' });
    expect(e.data).to.deep.equal({ id: 'sbx-1', state: 'running' });
    expect(e.acl).to.deep.equal({ scopes: ['sandbox.read'], owner: 'tok_1' });
    expect(seen).to.deep.equal(['sandboxes.state sandboxes/sbx-1 running']);
  });

  it('writes neither when the batch fails: no event without its change', async function () {
    const recs = store.sub<{ state: string }>('recs');
    const seen: number[] = [];
    log.listen((e) => seen.push(e.seq));
    const bad = [
      { type: 'put' as const, sub: recs, key: 'vm-1', value: { state: 'suspended' } },
      // A value the store cannot write: the whole batch is refused.
      { type: 'put' as const, sub: recs, key: 'vm-2', value: undefined },
    ];
    let failed = false;
    await writeWithState(eventsPort(log), store, bad, { domain: 'vms', resource: 'vms/1', state: 'suspended' }).catch(() => (failed = true));
    expect(failed, 'the batch was refused').to.equal(true);
    expect(await recs.get('vm-1')).to.equal(undefined);
    expect(await log.read(0, 10)).to.deep.equal([]);
    // The next event is released (the failed seq is a gap, not a hole that blocks the log).
    await writeWithState(eventsPort(log), store, [{ type: 'put', sub: recs, key: 'vm-1', value: { state: 'stopped' } }], {
      domain: 'vms',
      resource: 'vms/1',
      state: 'stopped',
    });
    expect((await log.read(0, 10)).map((e) => e.data.state)).to.deep.equal(['stopped']);
    expect(seen).to.have.length(1);
  });

  it('with a port that cannot join a batch, writes the change first and then its event', async function () {
    const recs = store.sub<{ state: string }>('recs');
    const order: string[] = [];
    const port: EventsPort = {
      publishState: async (domain, resource, state) => {
        order.push(`event ${state} (record ${JSON.stringify(await recs.get('x'))})`);
        void domain;
        void resource;
      },
    };
    await writeWithState(port, store, [{ type: 'put', sub: recs, key: 'x', value: { state: 'running' } }], {
      domain: 'vms',
      resource: 'vms/2',
      state: 'running',
    });
    expect(order).to.deep.equal(['event running (record {"state":"running"})']);
  });
});
