/**
 * Hardening item 10: which writes are synced to the disk (docs/durability.md).
 * A power loss cannot be simulated here, so this checks the decision where it
 * is made: every write the store hands to LevelDB, with the sublevels it
 * touches and whether it is synced, while the real services do their work.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import pino from 'pino';
import { Store, type WriteSeen } from '../../daemon/store/store.js';
import { TokenStore } from '../../daemon/auth/tokens.js';
import { ActivityLog } from '../../daemon/activity/log.js';
import { TaskRunner } from '../../daemon/tasks/runner.js';
import { IntentJournal } from '../../daemon/lib/journal.js';
import { JoinTokens } from '../../certs/join-tokens.js';
import { Membership } from '../../cluster/membership.js';
import { TokenDirectory } from '../../cluster/directory.js';
import { LeaseManager, type LeasePeerLink } from '../../cluster/lease.js';
import { ReplicatedConfig } from '../../cluster/replicated.js';
import { ClusterFiles } from '../../certs/files.js';
import { createCa, generateKeyPair, issueNodeCert } from '../../certs/pki.js';
import { Dispatch } from '../../api/dispatch.js';
import type { HandlerTable } from '../../api/handlers.js';
import type { Caller } from '../../daemon/lib/caller.js';
import { OPERATOR } from '../../daemon/lib/operator.js';
import { lxcHandlers } from '../../daemon/lxc/handlers.js';
import { LxcRecords } from '../../daemon/lxc/records.js';
import { lxcServices } from '../../daemon/lxc/services.js';
import { lxcContext } from '../../daemon/lxc/states.js';
import { FakeLxcDriver, containerRecord, fakeLxcDeps } from '../helpers/lxc-fake-driver.js';
import { eventually, tempDir } from '../helpers/daemon.js';

describe('hardening: what is synced to the disk', function () {
  this.timeout(60_000);
  let store: Store;
  let seen: WriteSeen[] = [];

  beforeEach(async () => {
    seen = [];
    store = await Store.open(path.join(tempDir('hostd-durable-'), 'db'), { onWrite: (w) => seen.push(w) });
  });
  afterEach(async () => {
    await store.close();
  });

  /** The writes `fn` made, as [sublevel, synced] pairs. */
  async function writes(fn: () => Promise<unknown>): Promise<Array<[string, boolean]>> {
    seen = [];
    await fn();
    return seen.flatMap((w) => w.sublevels.map((s): [string, boolean] => [s, w.sync]));
  }

  const synced = (ws: Array<[string, boolean]>, sub: string) => {
    const mine = ws.filter(([s]) => s === sub);
    expect(mine.length, `writes to ${sub}`).to.be.greaterThan(0);
    expect(
      mine.every(([, sync]) => sync),
      `every write to ${sub} synced: ${JSON.stringify(mine)}`,
    ).to.equal(true);
  };
  const lazy = (ws: Array<[string, boolean]>, sub: string) => {
    const mine = ws.filter(([s]) => s === sub);
    expect(mine.length, `writes to ${sub}`).to.be.greaterThan(0);
    expect(
      mine.every(([, sync]) => !sync),
      `every write to ${sub} lazy: ${JSON.stringify(mine)}`,
    ).to.equal(true);
  };

  it('tokens: create and revoke synced; the last-used flush lazy', async () => {
    const tokens = new TokenStore(store, new Set(['files.read']));
    await tokens.init();
    let secret = '';
    synced(
      await writes(async () => {
        secret = (await tokens.create('bot', ['files.read'])).secret;
      }),
      'tokens',
    );
    tokens.authenticate(secret);
    lazy(await writes(() => tokens.flush()), 'tokens');
    synced(await writes(() => tokens.revoke('bot')), 'tokens');
    await tokens.close();
  });

  it('activity rows (with their indexes) synced; pruning lazy', async () => {
    const log = new ActivityLog(store, { maxAgeDays: 0, maxRows: 100, pruneEveryMs: 3_600_000 });
    const ws = await writes(() => log.record({ category: 'auth', severity: 'info', summary: 's', target: 't', actor: 'a', metadata: { transport: 'api' } }));
    synced(ws, 'activity');
    synced(ws, 'activity_ix');
    await log.recordMany(
      Array.from({ length: 150 }, () => ({ category: 'auth', severity: 'info', summary: 's', target: 't', actor: 'a', metadata: { transport: 'api' } })),
    );
    lazy(await writes(() => log.prune()), 'activity');
  });

  it('cluster state: join tokens, member list, token directory, lease record and promises, replicated configuration: synced', async () => {
    const join = new JoinTokens(store);
    let token = '';
    synced(
      await writes(async () => {
        token = (await join.create('f'.repeat(64))).token;
      }),
      'join_tokens',
    );
    synced(await writes(() => join.consume(token)), 'join_tokens');
    const members = new Membership(store);
    const m = { peer_id: 'n1', name: 'n1', address: '127.0.0.1:1', fingerprint: 'ab', joined_at: '2025-01-01T00:00:00Z' };
    const ws = await writes(() => members.replace('cl_1', 1, [m]));
    synced(ws, 'peers');
    synced(ws, 'cluster');
    const dir = new TokenDirectory(store, 'n1');
    synced(await writes(() => dir.setSelf([{ id: 'tok_1', name: 'x', scopes: [] }])), 'token_directory');

    const link: LeasePeerLink = {
      selfId: 'n1',
      members: () => ['n1'],
      send: async () => {
        throw new Error('no peers');
      },
      sendProxyConfig: async () => {
        throw new Error('no peers');
      },
      isReachable: async () => false,
    };
    const log = pino({ level: 'silent' });
    const lease = new LeaseManager(store, link, log);
    await lease.init();
    synced(await writes(() => lease.initialize('n1')), 'lease');
    // A move is a proposal: the promise (phase 1) and the acceptance (phase 2) are stored before the answer.
    synced(await writes(() => lease.move('n1')), 'lease');
    const cfg = new ReplicatedConfig(store, link, log, {
      sublevel: 'test_config',
      what: 'test configuration',
      initial: () => ({ n: 0 }),
      validate: (v) => ({ n: Number((v as { n: number }).n) }),
    });
    await cfg.init();
    synced(await writes(() => cfg.update((c) => ({ n: c.n + 1 }))), 'test_config');
  });

  it('intents of a domain (and any sublevel nobody declared lazy): synced', async () => {
    const table = store.sub<{ what: string }>('things_intents');
    const journal = new IntentJournal(store, table);
    const ws = await writes(() =>
      journal.run('k1', { what: 'make' }, async () => 'made', { commit: (v) => [{ type: 'put', sub: store.sub('things'), key: 'k1', value: v }] }),
    );
    synced(ws, 'things_intents');
    synced(ws, 'things');
  });

  it('tasks: the record of an ended task synced; progress and log lines lazy', async () => {
    const runner = new TaskRunner(store, 'n1');
    await runner.init();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const ws = await writes(async () => {
      const rec = runner.start({ kind: 'test', title: 'test', owner: 'bot', resource: 'r' }, async (t) => {
        t.progress(50);
        t.log('half way');
        await gate;
        return { done: true };
      });
      // Every write of the running task so far has reached the store: its log line is readable, and the chain behind it is drained.
      await eventually(async () => (await runner.get(rec.task_id)).log_lines === 1, 30_000, 'the log line stored');
      await runner.drain();
      const before = seen.length;
      lazy(
        seen.slice(1, before).flatMap((w) => w.sublevels.map((s): [string, boolean] => [s, w.sync])),
        'tasks',
      );
      release();
      await runner.settled(rec.task_id);
    });
    lazy(ws, 'task_logs');
    // The last write of the task record is the ended one, and it is synced.
    const last = ws.filter(([s]) => s === 'tasks').at(-1)!;
    expect(last[1]).to.equal(true);
  });

  it("a call's own state event rides on its activity row's fsync: written lazily, then the row synced, last, before the answer", async () => {
    const dir = tempDir('hostd-durable-lxc-');
    fs.mkdirSync(path.join(dir, 'pool'));
    const driver = new FakeLxcDriver();
    const records = new LxcRecords(store);
    const tasks = new TaskRunner(store, 'n1');
    const published: string[] = [];
    const events = { publishState: async (_d: string, resource: string, state: string) => void published.push(`${resource} ${state}`) };
    const lctx = lxcContext(fakeLxcDeps({ records, driver, tasks, events, dir }));
    const services = lxcServices(lctx);
    const activity = new ActivityLog(store, { maxAgeDays: 0, maxRows: 100, pruneEveryMs: 3_600_000 });
    const dispatch = new Dispatch({
      handlers: lxcHandlers(services) as unknown as HandlerTable,
      activity,
      forwarder: { resolve: () => undefined },
      log: pino({ level: 'silent' }),
    });
    const caller: Caller = { tokenId: 'tok_1', tokenName: 'ops', scopes: ['lxc.manage'], transport: 'api', origin: 'n1' };
    await records.put(containerRecord(7));
    try {
      driver.states.set('svc-lxc-7', 'RUNNING');
      const ws = await writes(() => dispatch.call('lxc_stop', { id: 7 }, caller, 'r1'));
      expect(published).to.deep.equal(['lxc/7 STOPPED']);
      // The stored state written with the event, not synced on its own; the row after it, synced: one fsync for both.
      lazy(ws, 'lxc_meta');
      synced(ws, 'activity');
      const [lastSub, lastSynced] = ws.at(-1)!;
      expect([lastSub.startsWith('activity'), lastSynced], `the last write of the call is the row's, synced: ${JSON.stringify(ws)}`).to.deep.equal([
        true,
        true,
      ]);
      const syncedSubs = ws.filter(([, sync]) => sync).map(([sub]) => sub);
      expect(
        syncedSubs.every((sub) => sub.startsWith('activity')),
        `only the row's batch synced: ${JSON.stringify(ws)}`,
      ).to.equal(true);

      // The same change made where no row follows (the daemon's own call, e.g. autostart): synced on its own.
      driver.states.set('svc-lxc-7', 'STOPPED');
      const own = await writes(() => services.lifecycle.start(7, { note() {}, caller: { tokenName: OPERATOR } }));
      expect(published).to.deep.equal(['lxc/7 STOPPED', 'lxc/7 RUNNING']);
      synced(own, 'lxc_meta');
    } finally {
      await activity.close();
      await tasks.drain();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('certificate files are fsynced before they are renamed into place', () => {
    const dir = tempDir('hostd-durable-files-');
    const files = new ClusterFiles(dir);
    const ca = createCa('cl_x');
    const keys = generateKeyPair();
    const fsyncs: number[] = [];
    const orig = fs.fsyncSync;
    (fs as { fsyncSync: typeof fs.fsyncSync }).fsyncSync = (fd) => {
      fsyncs.push(fd);
      return orig(fd);
    };
    try {
      files.save({ caCertPem: ca.certPem, caKeyPem: ca.keyPem, certPem: issueNodeCert(ca, keys.publicKeyPem, 'n1'), keyPem: keys.privateKeyPem });
    } finally {
      (fs as { fsyncSync: typeof fs.fsyncSync }).fsyncSync = orig;
    }
    // Each of the four files, and the directory after each rename.
    expect(fsyncs.length).to.equal(8);
    expect(files.load()?.caKeyPem).to.equal(ca.keyPem);
  });
});
