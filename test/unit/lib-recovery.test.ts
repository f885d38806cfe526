/**
 * daemon/lib/recovery.ts: start-up recovery in one shape. Every open intent
 * is settled and dropped with its outcome in one batch; one that cannot be
 * settled yet stays open and pending; a retry touches only pending intents
 * (never one a call being served has opened); log lines carry the key and
 * what the domain chose to describe, never the intent itself.
 */
import { expect } from 'chai';
import { pino } from 'pino';
import { IntentJournal, type JournalDb, type JournalOp, type JournalTable } from '../../daemon/lib/journal.js';
import { IntentRecovery } from '../../daemon/lib/recovery.js';
import { rejectsApi } from '../helpers/expect.js';

/** A table in memory, in key order like a sublevel. */
class MemTable<V> implements JournalTable<V> {
  readonly rows = new Map<string, V>();
  async put(key: string, value: V): Promise<void> {
    this.rows.set(key, value);
  }
  async del(key: string): Promise<void> {
    this.rows.delete(key);
  }
  iterator() {
    return { all: async () => [...this.rows].sort(([a], [b]) => (a < b ? -1 : 1)) as Array<[string, V]> };
  }
}

/** A store whose batch applies every write or none. */
class MemDb implements JournalDb {
  batches = 0;
  async batch(ops: JournalOp[]): Promise<void> {
    this.batches++;
    for (const op of ops) {
      if (op.type === 'put') await (op.sub as MemTable<unknown>).put(op.key, op.value);
      else await (op.sub as MemTable<unknown>).del(op.key);
    }
  }
}

interface Intent {
  op: string;
  id: string;
  password?: string;
}

function logRecorder() {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string }> = [];
  const at = (level: string) => (obj: Record<string, unknown>, msg: string) => lines.push({ level, obj, msg });
  return { lines, info: at('info'), warn: at('warn'), error: at('error') };
}

function setUp(settle: (key: string, i: Intent) => Promise<JournalOp[]>, extra: { reconcile?: () => Promise<void> } = {}) {
  const db = new MemDb();
  const intents = new MemTable<Intent>();
  const records = new MemTable<string>();
  const journal = new IntentJournal<Intent>(db, intents);
  const log = logRecorder();
  const recovery = new IntentRecovery<Intent>({ domain: 'apps', journal, log, settle, describe: (i) => ({ op: i.op, id: i.id }), ...extra });
  return { db, intents, records, journal, log, recovery };
}

describe('IntentRecovery (daemon/lib/recovery.ts)', () => {
  it('settles every open intent: its outcome and the drop in one batch; then reconciles', async () => {
    const order: string[] = [];
    const s = setUp(
      async (key, i) => {
        order.push(key);
        return i.op === 'install' ? [{ type: 'put', sub: s.records, key: i.id, value: 'installed' }] : [];
      },
      { reconcile: async () => void order.push('reconcile') },
    );
    await s.intents.put('app:a', { op: 'install', id: 'a' });
    await s.intents.put('app:b', { op: 'delete', id: 'b' });
    const batchesBefore = s.db.batches;
    expect(await s.recovery.run()).to.deep.equal({ settled: 2, pending: [] });
    expect(order).to.deep.equal(['app:a', 'app:b', 'reconcile']);
    expect(s.db.batches - batchesBefore).to.equal(2);
    expect([...s.intents.rows.keys()]).to.deep.equal([]);
    expect([...s.records.rows]).to.deep.equal([['a', 'installed']]);
  });

  it('an intent whose settle fails stays open and pending with why; retry settles it once it can', async () => {
    let engineUp = false;
    const s = setUp(async (_key, i) => {
      if (!engineUp) throw new Error('Docker engine is not reachable');
      return [{ type: 'put', sub: s.records, key: i.id, value: 'settled' }];
    });
    await s.intents.put('app:a', { op: 'update', id: 'a' });
    expect(await s.recovery.run()).to.deep.equal({ settled: 0, pending: [{ key: 'app:a', reason: 'Docker engine is not reachable' }] });
    expect(s.intents.rows.has('app:a')).to.equal(true);
    await rejectsApi(
      s.recovery.requireSettled('app:a', "app 'a'"),
      503,
      "app 'a' has a change interrupted by a restart that cannot be settled yet: Docker engine is not reachable",
    );
    await s.recovery.requireSettled('app:other', "app 'other'");
    engineUp = true;
    await s.recovery.requireSettled('app:a', "app 'a'");
    expect(s.recovery.pending()).to.deep.equal([]);
    expect(s.intents.rows.has('app:a')).to.equal(false);
    expect(s.records.rows.get('a')).to.equal('settled');
  });

  it('retry never touches an intent opened after the run (a call being served)', async () => {
    const settled: string[] = [];
    let fail = true;
    const s = setUp(async (key) => {
      if (fail) throw new Error('not yet');
      settled.push(key);
      return [];
    });
    await s.intents.put('app:old', { op: 'move', id: 'old' });
    await s.recovery.run();
    await s.journal.begin('app:live', { op: 'install', id: 'live' });
    fail = false;
    expect(await s.recovery.retry()).to.deep.equal({ settled: 1, pending: [] });
    expect(settled).to.deep.equal(['app:old']);
    expect(s.intents.rows.has('app:live')).to.equal(true);
    expect(await s.recovery.retry()).to.deep.equal({ settled: 0, pending: [] });
  });

  it('runs once: a second run is refused (use retry)', async () => {
    const s = setUp(async () => []);
    await s.recovery.run();
    let err: unknown;
    await s.recovery.run().catch((e) => (err = e));
    expect((err as Error).message).to.equal('apps: recovery runs once, at open; use retry() for what it left pending');
  });

  it('logs the key and what describe gives, never the intent (it may hold a secret)', async () => {
    let fail = true;
    const s = setUp(async () => {
      if (fail) throw new Error('share unreachable');
      return [];
    });
    await s.intents.put('loc:1', { op: 'create', id: '1', password: 'hunter2' });
    await s.recovery.run();
    fail = false;
    await s.recovery.retry();
    const text = JSON.stringify(s.log.lines);
    expect(text).to.not.contain('hunter2');
    expect(s.log.lines.map((l) => [l.level, l.msg])).to.deep.equal([
      ['error', 'apps: cannot settle an interrupted change yet; it stays open and is retried'],
      ['info', 'apps: recovery done'],
      ['warn', 'apps: settled a change interrupted by a restart'],
      ['info', 'apps: recovery retried'],
    ]);
    expect(s.log.lines[2].obj).to.deep.equal({ domain: 'apps', key: 'loc:1', op: 'create', id: '1' });
  });

  it("each line names its domain once, also through a domain's child logger (which names it already)", async () => {
    const s = setUp(async () => []);
    await s.intents.put('loc:1', { op: 'create', id: '1' });
    const out: string[] = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void out.push(line) }).child({ domain: 'apps' });
    await new IntentRecovery<Intent>({ domain: 'apps', journal: s.journal, log, settle: async () => [], describe: (i) => ({ op: i.op, id: i.id }) }).run();
    expect(out.map((l) => JSON.parse(l).msg)).to.deep.equal(['apps: settled a change interrupted by a restart', 'apps: recovery done']);
    for (const line of out) {
      expect(line.split('"domain":').length - 1, line).to.equal(1);
      expect(JSON.parse(line).domain).to.equal('apps');
    }
  });

  it('a failing reconcile is logged and the run still reports its intents', async () => {
    const s = setUp(async () => [], {
      reconcile: async () => {
        throw new Error('qmp socket gone');
      },
    });
    await s.intents.put('app:a', { op: 'delete', id: 'a' });
    expect(await s.recovery.run()).to.deep.equal({ settled: 1, pending: [] });
    expect(s.log.lines.some((l) => l.level === 'error' && l.msg === 'apps: reconciling after recovery failed; the next run tries again')).to.equal(true);
  });
});
