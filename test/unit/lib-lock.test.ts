/**
 * daemon/lib/lock.ts: the keyed lock every domain takes (run, exclusive,
 * exclusiveOn for "404 before 409", hold for work that outlives the call) and
 * the labels a domain gives its keys once.
 */
import { expect } from 'chai';
import { KeyedLock, lockLabels } from '../../daemon/lib/lock.js';
import { ApiError, notFound } from '../../daemon/lib/errors.js';
import { rejectsApi } from '../helpers/expect.js';

const labels = lockLabels({ vm: (id) => `VM ${id}`, image: (id) => `image '${id}'` });

/** A promise and its resolver: work that ends when the test says so. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open!: () => void;
  const wait = new Promise<void>((r) => (open = r));
  return { wait, open };
}

describe('KeyedLock (daemon/lib/lock.ts)', () => {
  it('lockLabels reads <kind>:<rest> through the table, and any other key as itself', () => {
    expect(labels('vm:101')).to.equal('VM 101');
    expect(labels('image:a:b')).to.equal("image 'a:b'");
    expect(labels('ws:ws-1')).to.equal('ws:ws-1');
    expect(labels('plain')).to.equal('plain');
  });

  it('exclusive: 409 naming the key by the labels given once and what holds it', async () => {
    const lock = new KeyedLock(labels);
    const g = gate();
    const first = lock.exclusive(['vm:101'], 'clone to VM 102', () => g.wait);
    await rejectsApi(
      lock.exclusive(['vm:101'], 'start', async () => 'ran'),
      409,
      'VM 101 is busy: clone to VM 102 in progress',
    );
    g.open();
    await first;
    expect(await lock.exclusive(['vm:101'], 'start', async () => 'ran')).to.equal('ran');
  });

  it('exclusive keeps a per-call label for callers written before labels were given once', async () => {
    const lock = new KeyedLock(labels);
    const release = lock.hold(['ct:7'], 'move');
    await rejectsApi(
      lock.exclusive(
        ['ct:7'],
        'start',
        async () => 1,
        () => 'container 7',
      ),
      409,
      'container 7 is busy: move in progress',
    );
    release();
  });

  it('hold takes the keys at once: busy names the holder before anything is awaited, and the release frees them', async () => {
    const lock = new KeyedLock(labels);
    const release = lock.hold(['vm:1', 'image:deb'], 'template capture');
    expect(lock.busy('vm:1')).to.equal('template capture');
    expect(lock.busy('image:deb')).to.equal('template capture');
    expect(() => lock.hold(['image:deb'], 'delete')).to.throw(ApiError, "image 'deb' is busy: template capture in progress");
    await rejectsApi(
      lock.exclusive(['vm:1'], 'start', async () => 1),
      409,
      'VM 1 is busy: template capture in progress',
    );
    release();
    expect(lock.busy('vm:1')).to.equal(undefined);
    expect(lock.busy('image:deb')).to.equal(undefined);
    expect(await lock.exclusive(['vm:1', 'image:deb'], 'start', async () => 'free')).to.equal('free');
  });

  it('a second release does nothing (it never frees a later holder of the same key)', () => {
    const lock = new KeyedLock();
    const first = lock.hold(['k'], 'one');
    first();
    const second = lock.hold(['k'], 'two');
    first();
    expect(lock.busy('k')).to.equal('two');
    second();
    expect(lock.busy('k')).to.equal(undefined);
  });

  it('hold refuses when any key is busy and then holds none of them', () => {
    const lock = new KeyedLock();
    const r = lock.hold(['b'], 'first');
    expect(() => lock.hold(['a', 'b'], 'second')).to.throw(ApiError);
    expect(lock.busy('a')).to.equal(undefined);
    r();
  });

  it('run waits its turn, and busy names a holder that is already known at once', async () => {
    const lock = new KeyedLock();
    const g = gate();
    const order: string[] = [];
    const first = lock.run(
      ['k'],
      async () => {
        order.push('first');
        await g.wait;
      },
      'rename',
    );
    expect(lock.busy('k')).to.equal('rename');
    const second = lock.run(
      ['k'],
      async () => {
        order.push('second');
      },
      'create',
    );
    g.open();
    await Promise.all([first, second]);
    expect(order).to.deep.equal(['first', 'second']);
    expect(lock.busy('k')).to.equal(undefined);
  });

  describe('exclusiveOn: 404 before 409', () => {
    it('an unknown resource is its 404 even while its key is held', async () => {
      const lock = new KeyedLock(labels);
      const release = lock.hold(['vm:9'], 'create');
      const find = async () => {
        throw notFound('VM 9 not found');
      };
      await rejectsApi(
        lock.exclusiveOn(find, ['vm:9'], 'start', async () => 1),
        404,
        'VM 9 not found',
      );
      release();
    });

    it('a known busy resource is 409; a free one runs fn with the record looked up again under the lock', async () => {
      const lock = new KeyedLock(labels);
      let version = 1;
      const find = async () => ({ vmid: 5, version });
      const release = lock.hold(['vm:5'], 'suspend');
      await rejectsApi(
        lock.exclusiveOn(find, ['vm:5'], 'start', async () => 1),
        409,
        'VM 5 is busy: suspend in progress',
      );
      release();
      let lookups = 0;
      const counted = async () => {
        lookups++;
        return find();
      };
      const seen = await lock.exclusiveOn(
        counted,
        (r) => [`vm:${r.vmid}`],
        'start',
        async (fresh) => {
          expect(lock.busy('vm:5')).to.equal('start');
          return fresh.version;
        },
      );
      expect([seen, lookups]).to.deep.equal([1, 2]);
      version = 2;
      expect(await lock.exclusiveOn(find, ['vm:5'], 'start', async (fresh) => fresh.version)).to.equal(2);
    });

    it('a resource gone by the time the lock is taken is the 404 of the second look-up', async () => {
      const lock = new KeyedLock(labels);
      let exists = true;
      const find = async () => {
        if (!exists) throw notFound('VM 3 not found');
        exists = false; // deleted right after the first look-up
        return { vmid: 3 };
      };
      await rejectsApi(
        lock.exclusiveOn(find, ['vm:3'], 'start', async () => 'ran'),
        404,
        'VM 3 not found',
      );
      expect(lock.busy('vm:3')).to.equal(undefined);
    });
  });
});
