import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { ProxyRecords } from '../../../daemon/proxy/records.js';
import { Store } from '../../../daemon/store/store.js';

/**
 * The data plane's tick reads the `caddy` and `vip` records several times a
 * second; an absence read once is kept until a put op for the key is built,
 * so an idle member does not ask LevelDB each tick, and never answers absent
 * for a record that was put.
 */
describe('proxy records: caddy and vip absence kept between puts', () => {
  let dir: string;
  let store: Store;
  let records: ProxyRecords;
  let gets: string[];

  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-proxy-records-'));
    store = await Store.open(path.join(dir, 'db'));
    records = new ProxyRecords(store);
    // A sublevel opens after it is made: a read before then is deferred and
    // calls get again once open, which the counter below would see twice.
    await records.parked();
    gets = [];
    const get = records.state.get.bind(records.state) as (key: string) => Promise<unknown>;
    (records.state as unknown as { get: (key: string) => Promise<unknown> }).get = (key: string) => {
      gets.push(key);
      return get(key);
    };
  });

  afterEach(async () => {
    await store.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('reads an absent record once, then answers absent without reading', async () => {
    expect(await records.vip()).to.equal(undefined);
    expect(await records.vip()).to.equal(undefined);
    expect(await records.caddy()).to.equal(undefined);
    expect(await records.caddy()).to.equal(undefined);
    expect(gets).to.deep.equal(['vip', 'caddy']);
  });

  it('reads again once a put is built, and after a delete until it reads absent', async () => {
    expect(await records.vip()).to.equal(undefined);
    await store.batch([records.putVip({ iface: 'eth0', cidrs: ['10.9.0.5/24'] })]);
    expect(await records.vip()).to.deep.equal({ iface: 'eth0', cidrs: ['10.9.0.5/24'] });
    expect(await records.vip()).to.deep.equal({ iface: 'eth0', cidrs: ['10.9.0.5/24'] });
    await store.batch([records.delVip()]);
    expect(await records.vip()).to.equal(undefined);
    expect(await records.vip()).to.equal(undefined);
    expect(gets).to.deep.equal(['vip', 'vip', 'vip', 'vip']);

    await records.caddy();
    await store.batch([records.putCaddy({ pid: 4242, boot: 'b1' })]);
    expect(await records.caddy()).to.deep.equal({ pid: 4242, boot: 'b1' });
  });

  it('does not keep an absence read while a put was built', async () => {
    // The read is held until the put is written: it saw the key before the put.
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let readDone!: () => void;
    const read = new Promise<void>((r) => (readDone = r));
    // Around the counting get of beforeEach.
    const get = records.state.get.bind(records.state) as (key: string) => Promise<unknown>;
    (records.state as unknown as { get: (key: string) => Promise<unknown> }).get = async (key: string) => {
      const v = await get(key);
      readDone();
      await held;
      return v;
    };
    const reading = records.vip();
    await read;
    await store.batch([records.putVip({ iface: 'eth0', cidrs: ['10.9.0.6/24'] })]);
    release();
    expect(await reading).to.equal(undefined);
    expect(await records.vip()).to.deep.equal({ iface: 'eth0', cidrs: ['10.9.0.6/24'] });
  });
});
