/**
 * daemon/lib/locked-task.ts: a task holds its resource keys for its whole
 * run (a conflicting call meanwhile is 409 naming what holds them) and lets
 * them go when the work ends, succeeded, failed, or never started.
 */
import { expect } from 'chai';
import { KeyedLock, lockLabels } from '../../daemon/lib/lock.js';
import { lockedTask, startHolding } from '../../daemon/lib/locked-task.js';
import { ApiError } from '../../daemon/lib/errors.js';
import type { TaskHandle, TaskRecord, TaskStart, TaskWork, Tasks } from '../../daemon/lib/tasks.js';
import { rejectsApi } from '../helpers/expect.js';

/** Tasks that run in memory: the record's state follows the work. */
class MemoryTasks implements Tasks {
  readonly records = new Map<string, TaskRecord>();
  private readonly ends = new Map<string, Promise<TaskRecord>>();
  private n = 0;
  refuse: Error | null = null;

  start(what: TaskStart, work: TaskWork): TaskRecord {
    if (this.refuse) throw this.refuse;
    const id = `task_${++this.n}`;
    const at = new Date().toISOString();
    const rec: TaskRecord = {
      task_id: id,
      kind: what.kind,
      title: what.title,
      state: 'running',
      progress: 0,
      node_id: 'n1',
      owner: what.owner,
      resource: what.resource,
      target: what.resource,
      created_at: at,
      started_at: at,
      finished_at: null,
      result: null,
      error: null,
      log_lines: 0,
    };
    this.records.set(id, rec);
    const handle: TaskHandle = { id, signal: new AbortController().signal, log() {}, progress() {} };
    this.ends.set(
      id,
      Promise.resolve()
        .then(() => work(handle))
        .then(
          (result) => Object.assign(rec, { state: 'succeeded', result }),
          (err: Error) => Object.assign(rec, { state: 'failed', error: err.message }),
        ),
    );
    return { ...rec };
  }

  async get(id: string): Promise<TaskRecord> {
    return this.records.get(id)!;
  }

  settled(id: string): Promise<TaskRecord> {
    return this.ends.get(id)!;
  }
}

const START: TaskStart = { kind: 'lxc.container.move', title: 'Move container 7', owner: 'alice', resource: 'lxc/7' };
const labels = lockLabels({ ct: (id) => `container ${id}` });

function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

describe('lockedTask and startHolding (daemon/lib/locked-task.ts)', () => {
  it('holds the keys while the task runs (409 naming the task) and frees them when it succeeds', async () => {
    const lock = new KeyedLock(labels);
    const tasks = new MemoryTasks();
    const g = gate();
    const rec = lockedTask(lock, tasks, ['ct:7'], 'move', START, async () => {
      await g.wait;
      return { moved: true };
    });
    expect(rec.kind).to.equal('lxc.container.move');
    expect(lock.busy('ct:7')).to.equal('move');
    await rejectsApi(
      lock.exclusive(['ct:7'], 'start', async () => 1),
      409,
      'container 7 is busy: move in progress',
    );
    expect(() => lockedTask(lock, tasks, ['ct:7'], 'template capture', START, async () => 1)).to.throw(ApiError, 'container 7 is busy: move in progress');
    g.open();
    expect((await tasks.settled(rec.task_id)).state).to.equal('succeeded');
    expect(lock.busy('ct:7')).to.equal(undefined);
  });

  it('frees the keys when the work fails', async () => {
    const lock = new KeyedLock(labels);
    const tasks = new MemoryTasks();
    const rec = lockedTask(lock, tasks, ['ct:7', 'img:p1:deb'], 'move', START, async () => {
      throw new Error('disk full');
    });
    const end = await tasks.settled(rec.task_id);
    expect([end.state, end.error]).to.deep.equal(['failed', 'disk full']);
    expect(lock.busy('ct:7')).to.equal(undefined);
    expect(lock.busy('img:p1:deb')).to.equal(undefined);
  });

  it('a busy key refuses before any task is recorded', () => {
    const lock = new KeyedLock(labels);
    const tasks = new MemoryTasks();
    const release = lock.hold(['ct:7'], 'delete');
    expect(() => lockedTask(lock, tasks, ['ct:7'], 'move', START, async () => 1)).to.throw(ApiError, 'container 7 is busy: delete in progress');
    expect(tasks.records.size).to.equal(0);
    release();
  });

  it('startHolding: a task that cannot be started releases the hold the caller handed it', () => {
    const lock = new KeyedLock(labels);
    const tasks = new MemoryTasks();
    tasks.refuse = new Error('the task store is closed');
    const release = lock.hold(['ct:7'], 'move');
    expect(() => startHolding(tasks, release, START, async () => 1)).to.throw('the task store is closed');
    expect(lock.busy('ct:7')).to.equal(undefined);
  });

  it('startHolding: prepared under the hold, then handed over; the task ends it', async () => {
    const lock = new KeyedLock(labels);
    const tasks = new MemoryTasks();
    const release = lock.hold(['ct:7'], 'create');
    const prepared: string[] = ['intent written']; // what a service does under the keys before the task starts
    const g = gate();
    const rec = startHolding(tasks, release, START, async () => {
      await g.wait;
      prepared.push('copied');
    });
    expect(lock.busy('ct:7')).to.equal('create');
    g.open();
    await tasks.settled(rec.task_id);
    expect(prepared).to.deep.equal(['intent written', 'copied']);
    expect(lock.busy('ct:7')).to.equal(undefined);
  });
});
