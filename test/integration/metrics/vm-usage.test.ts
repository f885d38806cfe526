/**
 * How the QEMU driver reads a VM's figures for the metrics (daemon/vms/qemu/usage.ts),
 * on the texts the kernel and QEMU 7.2 give: the process's CPU time past a
 * command name with spaces and parentheses, its resident memory, block
 * bytes of the guest's devices only, and the tap (bridged) a user-mode VM
 * does not have. The runtime side (a real VM) is test/runtime/metrics/vms.test.ts.
 */
import { expect } from 'chai';
import { cpuSecondsOfStat, rssOfStatus, sumBlockStats, tapOfNetworkInfo } from '../../../daemon/vms/qemu/usage.js';

describe('metrics: reading a VM figures from /proc and QMP', () => {
  it('CPU seconds: utime + stime in USER_HZ ticks, counted after the last parenthesis of the command name', () => {
    const fields = ['S', '1', '2', '3', '0', '-1', '4194560', '100', '0', '0', '0', '1234', '566', '0', '0', '20', '0', '3', '0', '99', '1000', '300'];
    expect(cpuSecondsOfStat(`4242 (qemu-system-x86) ${fields.join(' ')}`)).to.equal(18);
    expect(cpuSecondsOfStat(`4242 (a) b (c) ${fields.join(' ')}`)).to.equal(18);
    expect(cpuSecondsOfStat('4242 (cut')).to.equal(null);
  });

  it('memory: VmRSS of /proc/<pid>/status in bytes; none without the line', () => {
    expect(rssOfStatus('Name:\tqemu-system-x86\nVmPeak:\t 2000000 kB\nVmRSS:\t 1315800 kB\nRssAnon:\t 1200000 kB\n')).to.equal(1315800 * 1024);
    expect(rssOfStatus('Name:\tqemu-system-x86\n')).to.equal(null);
  });

  it("disk bytes: summed over the guest's devices (root, added disks, the seed CD-ROM), not over nodes no device uses", () => {
    const list = [
      { device: '', qdev: '/machine/peripheral/dev-root/virtio-backend', stats: { rd_bytes: 1000, wr_bytes: 10 } },
      { device: 'seed', qdev: '/machine/peripheral-anon/device[1]', stats: { rd_bytes: 200, wr_bytes: 0 } },
      { device: '', qdev: '/machine/peripheral/dev-disk-d1/virtio-backend', stats: { rd_bytes: 30, wr_bytes: 3 } },
      { device: '', stats: { rd_bytes: 99999, wr_bytes: 99999 } },
    ];
    expect(sumBlockStats(list)).to.deep.equal({ read: 1230, written: 13 });
  });

  it("network: the tap's name from `info network` on a bridged VM; none on user-mode NAT or without a card", () => {
    const bridged =
      'dev-net0: index=0,type=nic,model=virtio-net-pci,macaddr=52:54:00:12:34:56\r\n \\ net0: index=0,type=tap,ifname=tap3,script=/var/lib/hostd/run/vm-101/ifup,downscript=no\r\n';
    expect(tapOfNetworkInfo(bridged)).to.equal('tap3');
    const user = 'dev-net0: index=0,type=nic,model=virtio-net-pci,macaddr=52:54:00:12:34:56\r\n \\ net0: index=0,type=user,net=10.0.2.0,restrict=on\r\n';
    expect(tapOfNetworkInfo(user)).to.equal(null);
    expect(tapOfNetworkInfo('')).to.equal(null);
    // A name that could leave /sys/class/net is not taken.
    expect(tapOfNetworkInfo(' \\ net0: index=0,type=tap,ifname=../../etc,script=no\r\n')).to.equal(null);
    expect(tapOfNetworkInfo(' \\ net0: index=0,type=tap,ifname=..,script=no\r\n')).to.equal(null);
  });
});
