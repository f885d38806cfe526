/**
 * The LXC service's rules that hold before the runtime is touched, on a fake
 * driver (no lxc-* program runs): a missing program is 503 naming it; an
 * unknown container is 404, never a 409 about nothing; a name is taken
 * without regard to case; a privileged container is 403 while the host
 * turns them off; and a container that breaks a rule now is never let run
 * again, neither by a start of a frozen one nor by an unfreeze (the fake
 * records that the runtime was not asked). The same rules on the real
 * runtime: test/runtime/lxc/ and test/security/lxc/.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { noNotes, type CallContext } from '../../../daemon/lib/caller.js';
import { ApiError } from '../../../daemon/lib/errors.js';
import type { LxcContext } from '../../../daemon/lxc/context.js';
import { lxcContext } from '../../../daemon/lxc/states.js';
import { LxcRecords } from '../../../daemon/lxc/records.js';
import { lxcServices, type LxcServices } from '../../../daemon/lxc/services.js';
import { Store } from '../../../daemon/store/store.js';
import { TaskRunner } from '../../../daemon/tasks/runner.js';
import { FakeLxcDriver, containerRecord, fakeLxcDeps } from '../../helpers/lxc-fake-driver.js';

describe('lxc service rules (fake driver)', () => {
  let dir: string;
  let store: Store;
  let tasks: TaskRunner;
  let driver: FakeLxcDriver;
  let records: LxcRecords;
  let s: LxcServices;
  let lctx: LxcContext;
  /** The `lxc.state` events the service published, in order. */
  let published: Array<{ resource: string; state: string; data: Record<string, unknown>; actor?: string }>;
  const ctx: CallContext = { ...noNotes, requestId: 'r1', caller: { tokenId: 't1', tokenName: 't', scopes: [], transport: 'api', origin: 'n1' } };

  /** The promise rejects with an ApiError of this status whose message matches. */
  async function rejectsApi(p: Promise<unknown>, status: number, message: RegExp | string): Promise<void> {
    const err = await p.then(
      () => null,
      (e: unknown) => e,
    );
    expect(err, `expected ApiError ${status}`).to.be.instanceOf(ApiError);
    expect((err as ApiError).status, (err as Error).message).to.equal(status);
    if (typeof message === 'string') expect((err as ApiError).message).to.equal(message);
    else expect((err as ApiError).message).to.match(message);
  }

  const record = containerRecord;

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-lxc-svc-'));
    fs.mkdirSync(path.join(dir, 'pool'));
    store = await Store.open(path.join(dir, 'db'));
    tasks = new TaskRunner(store, 'n1');
    driver = new FakeLxcDriver();
    records = new LxcRecords(store);
    published = [];
    const events = {
      publishState: async (_d: string, resource: string, state: string, data: Record<string, unknown> = {}, opts: { actor?: string } = {}) =>
        void published.push({ resource, state, data, actor: opts.actor }),
    };
    lctx = lxcContext(fakeLxcDeps({ records, driver, tasks, events, dir }));
    s = lxcServices(lctx);
  });
  afterEach(async () => {
    await tasks.drain();
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('503 naming the missing program, before anything else is looked at', async () => {
    driver.missing.set('lxc-start', 'not installed (install lxc)');
    await rejectsApi(s.lifecycle.start(404, ctx), 503, /lxc-start/);
    await rejectsApi(s.create.create({ name: 'x', template: 'nope' }, ctx), 503, /lxc-start/);
    expect(driver.calls).to.deep.equal([]);
  });

  it('an unknown container is 404 for every change, and the runtime is not asked', async () => {
    const calls = [
      () => s.lifecycle.start(7, ctx),
      () => s.lifecycle.stop(7, ctx),
      () => s.lifecycle.freeze(7, ctx),
      () => s.lifecycle.unfreeze(7, ctx),
      () => s.containers.delete(7, ctx),
      () => s.containers.get(7),
    ];
    for (const call of calls) await rejectsApi(call(), 404, /^container 7 not found$/);
    expect(driver.calls).to.deep.equal([]);
  });

  it('a name is taken without regard to case: 409 naming the holder', async () => {
    await records.put(record(7, { name: 'Web' }));
    await records.put(record(8, { name: 'db' }));
    await rejectsApi(s.containers.update({ id: 8, new_name: 'WEB' }, ctx), 409, /^a container named 'WEB' exists already \(lxcid 7\)$/);
  });

  it('a privileged container is 403 naming lxc.allow_privileged, before the image is unpacked', async () => {
    driver.imageRefs = [
      {
        meta: { image_id: 'bb', source: 'import', file: 'rootfs.tar.xz', compression: 'xz', size_bytes: 1, sha256: 'x', created_at: '' },
        storage_id: 'p',
        dir: '/x',
        file: '/x/rootfs.tar.xz',
      },
    ];
    await rejectsApi(s.create.create({ name: 'x', template: 'bb', privileged: true }, ctx), 403, /lxc\.allow_privileged is false/);
    expect(driver.calls).to.deep.equal([]);
  });

  it('a frozen container that breaks a rule now is neither thawed by a start nor unfrozen: 409, and the runtime is not asked', async () => {
    await records.put(record(7, { privileged: true, idmap: null }));
    driver.states.set('svc-lxc-7', 'FROZEN');
    const rule = 'container 7 is privileged and lxc.allow_privileged is false (a privileged container is root on the host)';
    await rejectsApi(s.lifecycle.start(7, ctx), 409, `container 7 cannot start: ${rule}`);
    await rejectsApi(s.lifecycle.unfreeze(7, ctx), 409, `container 7 cannot unfreeze: ${rule}`);
    expect(driver.calls).to.deep.equal([]);
    // It may still be stopped (the stop thaws it first).
    await s.lifecycle.stop(7, ctx);
    expect(driver.calls).to.deep.equal(['unfreeze svc-lxc-7', 'stop svc-lxc-7']);
  });

  it('a frozen container that breaks no rule is thawed by a start', async () => {
    await records.put(record(7));
    driver.states.set('svc-lxc-7', 'FROZEN');
    const r = await s.lifecycle.start(7, ctx);
    expect(r.container.state).to.equal('running');
    expect(driver.calls).to.deep.equal(['unfreeze svc-lxc-7']);
  });

  it('state events: a runtime signal for a container a call holds is left to the call; once free, the change is reported once as init-exited', async () => {
    await records.put(record(7));
    driver.states.set('svc-lxc-7', 'RUNNING');
    // The first check remembers where a container stands without an event (containers from before state events).
    await lctx.states.checkAll('open');
    expect(published).to.deep.equal([]);
    driver.states.set('svc-lxc-7', 'STOPPED');
    const release = lctx.lock.hold(['ct:7'], 'stop');
    lctx.states.observe({ lxcName: 'svc-lxc-7', state: 'STOPPED', exitStatus: 0 });
    await lctx.states.idle();
    expect(published, 'a call is at work: its own report names the change').to.deep.equal([]);
    release();
    lctx.states.observe({ lxcName: 'svc-lxc-7', state: 'STOPPED', exitStatus: 0 });
    lctx.states.observe({ lxcName: 'svc-lxc-7', state: 'STOPPED' });
    await lctx.states.idle();
    expect(published).to.deep.equal([{ resource: 'lxc/7', state: 'STOPPED', data: { reason: 'init-exited', exit_status: 0 }, actor: 'runtime' }]);
    // A call that changes no state (here a docs-like no-op) holding the container when it stops from outside:
    // the signal is checked once the call ends, not lost.
    driver.states.set('svc-lxc-7', 'RUNNING');
    await lctx.states.changed(7, 'RUNNING', { caller: { tokenName: 't' } });
    await lctx.onContainer(7, 'update', async () => {
      driver.states.set('svc-lxc-7', 'STOPPED');
      lctx.states.observe({ lxcName: 'svc-lxc-7', state: 'STOPPED' });
      await lctx.states.idle();
    });
    await lctx.states.idle();
    expect(published.map((p) => [p.state, p.data.reason])).to.deep.equal([
      ['STOPPED', 'init-exited'],
      ['RUNNING', undefined],
      ['STOPPED', 'init-exited'],
    ]);
    published.length = 1;
    // Transient states are never reported.
    lctx.states.observe({ lxcName: 'svc-lxc-7', state: 'STARTING' });
    await lctx.states.idle();
    expect(published).to.have.length(1);
  });

  it('a signal during a call that says what the call reported is not checked again; one that says otherwise is', async () => {
    await records.put(record(7));
    driver.states.set('svc-lxc-7', 'RUNNING');
    await lctx.states.changed(7, 'RUNNING', ctx);
    published.length = 0;
    // A stop call: its own stop's signal comes while it holds the container.
    await lctx.onContainer(7, 'stop', async () => {
      driver.states.set('svc-lxc-7', 'STOPPED');
      lctx.states.observe({ lxcName: 'svc-lxc-7', state: 'STOPPED', exitStatus: 0 });
      await lctx.states.changed(7, 'STOPPED', ctx);
    });
    await lctx.states.idle();
    expect(published.map((p) => [p.state, p.actor])).to.deep.equal([['STOPPED', 't']]);
    expect(driver.stateAsked, 'the runtime is not asked again (lxc-info on a host)').to.equal(0);
    // A start call during which the container dies: the signal is checked once the call ends, and reported.
    await lctx.onContainer(7, 'start', async () => {
      driver.states.set('svc-lxc-7', 'RUNNING');
      await lctx.states.changed(7, 'RUNNING', ctx);
      driver.states.set('svc-lxc-7', 'STOPPED');
      lctx.states.observe({ lxcName: 'svc-lxc-7', state: 'STOPPED', exitStatus: 1 });
    });
    await lctx.states.idle();
    expect(driver.stateAsked).to.equal(1);
    expect(published.map((p) => [p.state, p.data.reason, p.actor])).to.deep.equal([
      ['STOPPED', undefined, 't'],
      ['RUNNING', undefined, 't'],
      ['STOPPED', 'init-exited', 'runtime'],
    ]);
  });
});
