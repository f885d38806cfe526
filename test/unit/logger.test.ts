import { expect } from 'chai';
import pino from 'pino';
import { LineBatch } from '../../daemon/logger.js';

describe('logger: the line batch', () => {
  const setup = () => {
    const writes: string[] = [];
    const batch = new LineBatch({ write: (t: string) => writes.push(t) }, 8192);
    const log = pino({ level: 'info', base: { pid: 1 } }, batch);
    return { writes, batch, log };
  };

  it('gathers info lines until the batch is full or flushed, in order', () => {
    const { writes, batch, log } = setup();
    log.info('one');
    log.info({ n: 2 }, 'two');
    expect(writes).to.deep.equal([]);
    batch.flushSync();
    expect(writes).to.have.length(1);
    expect(
      writes[0]
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l).msg),
    ).to.deep.equal(['one', 'two']);
  });

  it('writes a warn, error or fatal line at once, with the lines gathered before it', () => {
    for (const level of ['warn', 'error', 'fatal'] as const) {
      const { writes, log } = setup();
      log.info('before');
      log[level]({ refused: [1] }, 'urgent');
      expect(writes, level).to.have.length(1);
      expect(
        writes[0]
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l).msg),
        level,
      ).to.deep.equal(['before', 'urgent']);
    }
  });

  it('writes once the gathered text reaches its length', () => {
    const { writes, log } = setup();
    for (let i = 0; i < 200 && writes.length === 0; i++) log.info({ pad: 'x'.repeat(100) }, `line ${i}`);
    expect(writes).to.have.length(1);
    expect(writes[0].length).to.be.at.least(8192);
  });
});
