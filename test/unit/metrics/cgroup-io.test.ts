/**
 * The LXC containers' disk bytes for the metrics: the cgroup files' block I/O
 * counters summed over devices (v1 `blkio.throttle.io_service_bytes*`, v2
 * `io.stat`), as the kernel writes them.
 */
import { expect } from 'chai';
import { parseBlkioBytes, parseIoStat } from '../../../daemon/lxc/lxc-tools/cgroups.js';

describe('metrics: LXC block I/O from cgroup files', () => {
  it('sums the Read and Write lines of blkio.throttle.io_service_bytes over devices, ignoring Sync, Async, Discard and Total', () => {
    const text = [
      '8:0 Read 4096',
      '8:0 Write 8192',
      '8:0 Sync 12288',
      '8:0 Async 0',
      '8:0 Discard 0',
      '8:0 Total 12288',
      '7:1 Read 100',
      '7:1 Write 1',
      '7:1 Total 101',
      'Total 12389',
      '',
    ].join('\n');
    expect(parseBlkioBytes(text)).to.deep.equal({ read_bytes: 4196, written_bytes: 8193 });
    expect(parseBlkioBytes('Total 0\n')).to.deep.equal({ read_bytes: 0, written_bytes: 0 });
  });

  it('sums rbytes and wbytes of io.stat over devices', () => {
    const text = '8:0 rbytes=1048576 wbytes=4096 rios=10 wios=1 dbytes=0 dios=0\n259:0 rbytes=5 wbytes=7 rios=1 wios=1 dbytes=0 dios=0\n';
    expect(parseIoStat(text)).to.deep.equal({ read_bytes: 1048581, written_bytes: 4103 });
    expect(parseIoStat('')).to.deep.equal({ read_bytes: 0, written_bytes: 0 });
  });
});
