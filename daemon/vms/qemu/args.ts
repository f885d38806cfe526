/**
 * The QEMU command line of a VM, built from its spec (pure, unit-tested).
 *
 * Every PCI device sits at a fixed slot so that a machine started with
 * `-incoming` (resume, warm-state restore) has the same device layout as the
 * one that saved the state, whether its disks came from the command line or
 * a hot-plug. The seed CD-ROM is always present (empty without cloud-init)
 * for the same reason.
 */
import path from 'node:path';
import type { Accel, DiskSpec, MachineSpec, NetSpec } from '../driver.js';

export type { Accel, DiskSpec, MachineSpec, NetSpec };

export const SLOT = { net: 3, root: 4, serial: 5, rng: 6 } as const;
export const FIRST_DISK_SLOT = 8;
export const LAST_DISK_SLOT = 0x1f;

export const runFiles = (runDir: string) => ({
  qmp: path.join(runDir, 'qmp.sock'),
  qga: path.join(runDir, 'qga.sock'),
  pid: path.join(runDir, 'qemu.pid'),
  serial: path.join(runDir, 'serial.log'),
});

const hex = (n: number) => '0x' + n.toString(16);

/** QEMU's option syntax doubles a comma inside a value. */
export const optValue = (v: string) => v.replace(/,/g, ',,');

/** A path that is safe inside `exec:cat <path>` (QEMU runs it through /bin/sh). */
export function shellSafePath(p: string): string {
  if (!path.isAbsolute(p) || !/^[A-Za-z0-9_./@+-]+$/.test(p)) throw new Error(`path '${p}' cannot be used in a migration command`);
  return p;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

function checkUuid(v: string): string {
  if (!UUID.test(v)) throw new Error(`'${v}' is not a lowercase UUID`);
  return v;
}

export function machineArgs(m: MachineSpec): string[] {
  const f = runFiles(m.runDir);
  const a: string[] = [
    '-name',
    `${m.name},process=hostd-${m.name}`,
    '-uuid',
    m.uuid,
    '-machine',
    'pc',
    '-accel',
    m.accel === 'kvm' ? 'kvm' : m.tcgTbSizeMb ? `tcg,tb-size=${m.tcgTbSizeMb}` : 'tcg',
    '-cpu',
    m.accel === 'kvm' ? 'host' : 'max',
    '-smp',
    String(m.cpuCores),
    '-m',
    `${m.memoryMb}M`,
    '-nodefaults',
    '-no-user-config',
    '-display',
    'none',
    '-rtc',
    'base=utc',
    '-serial',
    `file:${optValue(f.serial)}`,
    '-qmp',
    `unix:${optValue(f.qmp)},server=on,wait=off`,
    '-chardev',
    `socket,id=qga0,path=${optValue(f.qga)},server=on,wait=off`,
    '-device',
    `virtio-serial-pci,id=vser0,bus=pci.0,addr=${hex(SLOT.serial)}`,
    '-device',
    'virtserialport,bus=vser0.0,chardev=qga0,name=org.qemu.guest_agent.0',
    '-object',
    'rng-random,id=rng0,filename=/dev/urandom',
    '-device',
    `virtio-rng-pci,rng=rng0,bus=pci.0,addr=${hex(SLOT.rng)}`,
    // Not a PCI device (ACPI and fw_cfg): no slot. With -incoming, QEMU writes this guid into the
    // guest's memory when the state is loaded and raises the ACPI notify, so a resumed kernel
    // (Linux 5.18+) reseeds its random-number generator before it runs on.
    ...(m.generationId === null ? [] : ['-device', `vmgenid,id=vmgenid0,guid=${checkUuid(m.generationId)}`]),
    '-blockdev',
    `driver=qcow2,node-name=root,file.driver=file,file.filename=${optValue(m.rootFile)},discard=unmap`,
    '-device',
    `virtio-blk-pci,drive=root,id=dev-root,bus=pci.0,addr=${hex(SLOT.root)},bootindex=1`,
  ];
  for (const d of m.disks) {
    a.push(
      '-blockdev',
      `driver=qcow2,node-name=disk-${d.id},file.driver=file,file.filename=${optValue(d.file)},discard=unmap`,
      '-device',
      `virtio-blk-pci,drive=disk-${d.id},id=dev-disk-${d.id},bus=pci.0,addr=${hex(d.slot)}`,
    );
  }
  a.push('-drive', m.seedIso ? `if=none,id=seed,media=cdrom,readonly=on,file=${optValue(m.seedIso)}` : 'if=none,id=seed,media=cdrom');
  a.push('-device', 'ide-cd,drive=seed,bus=ide.1,unit=0');
  switch (m.net.type) {
    case 'user': {
      const opts = [`user,id=net0`, `hostfwd=tcp:127.0.0.1:${m.net.sshPort}-:22`];
      if (m.net.restrict) opts.push('restrict=on');
      a.push('-netdev', opts.join(','), '-device', `virtio-net-pci,netdev=net0,mac=${m.net.mac},id=dev-net0,bus=pci.0,addr=${hex(SLOT.net)}`);
      break;
    }
    case 'bridged':
      a.push(
        '-netdev',
        `tap,id=net0,script=${optValue(m.net.ifupScript)},downscript=no`,
        '-device',
        `virtio-net-pci,netdev=net0,mac=${m.net.mac},id=dev-net0,bus=pci.0,addr=${hex(SLOT.net)}`,
      );
      break;
    case 'none':
      break;
  }
  if (m.incoming) a.push('-incoming', `exec:cat ${shellSafePath(m.incoming)}`);
  a.push('-daemonize', '-pidfile', f.pid);
  return a;
}

/** A locally administered MAC in QEMU's 52:54:00 range, fixed per VM id and instance. */
export function macFor(vmid: number, salt = 0): string {
  const n = (vmid * 7919 + salt * 104729) & 0xffffff;
  const b = [(n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
  return ['52', '54', '00', ...b.map((x) => x.toString(16).padStart(2, '0'))].join(':');
}
