/**
 * A VM's identity, written into its root filesystem before its first boot:
 * `/etc/svc/seed`, `/etc/hostname`, and (unless the caller keeps the source's
 * identity) a cleared machine-id and removed SSH host keys, plus a one-shot
 * unit that makes new host keys at boot when nothing else does.
 *
 * No loop device or NBD is needed: qemu-storage-daemon exports the qcow2 disk
 * as a raw file over FUSE, the partition table is read here, and debugfs
 * (e2fsprogs) edits the ext2/3/4 root filesystem inside it at its offset.
 * Images whose root is not ext* get their identity from cloud-init instead
 * (the caller falls back; see docs/vms.md).
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../lib/run.js';
import { NoExtRoot, type IdentityPlan, type IdentityResult } from '../driver.js';

export { NoExtRoot, type IdentityPlan, type IdentityResult };

export interface Partition {
  /** Byte offset of the partition. */
  offset: number;
  /** Size in bytes. */
  size: number;
}

const SECTOR = 512;

/** Partitions of an MBR or GPT disk, from its first sectors (pure). `head` must hold the GPT entries too. */
export function parsePartitions(head: Buffer): Partition[] {
  if (head.length < 1024 || head.readUInt16LE(510) !== 0xaa55) return [];
  const mbr: Partition[] = [];
  let protective = false;
  for (let i = 0; i < 4; i++) {
    const e = 446 + i * 16;
    const type = head[e + 4];
    const start = head.readUInt32LE(e + 8);
    const count = head.readUInt32LE(e + 12);
    if (type === 0xee) protective = true;
    else if (type !== 0 && type !== 0x05 && type !== 0x0f && type !== 0x85 && count > 0) mbr.push({ offset: start * SECTOR, size: count * SECTOR });
  }
  if (!protective) return mbr;
  if (head.subarray(SECTOR, SECTOR + 8).toString('latin1') !== 'EFI PART') return mbr;
  const entriesLba = Number(head.readBigUInt64LE(SECTOR + 72));
  const num = head.readUInt32LE(SECTOR + 80);
  const esize = head.readUInt32LE(SECTOR + 84);
  const out: Partition[] = [];
  for (let i = 0; i < Math.min(num, 256); i++) {
    const e = entriesLba * SECTOR + i * esize;
    if (e + 128 > head.length) break;
    if (head.subarray(e, e + 16).every((b) => b === 0)) continue;
    const first = Number(head.readBigUInt64LE(e + 32));
    const last = Number(head.readBigUInt64LE(e + 40));
    out.push({ offset: first * SECTOR, size: (last - first + 1) * SECTOR });
  }
  return out;
}

const EXT_MAGIC_AT = 1024 + 56;

async function readAt(fh: fs.FileHandle, pos: number, len: number): Promise<Buffer> {
  const b = Buffer.alloc(len);
  const { bytesRead } = await fh.read(b, 0, len, pos);
  return b.subarray(0, bytesRead);
}

/** Offsets of ext2/3/4 filesystems on a raw disk: its partitions, largest first, or the whole disk. */
export async function extFilesystems(raw: string): Promise<number[]> {
  const fh = await fs.open(raw, 'r');
  try {
    const head = await readAt(fh, 0, 34 * SECTOR);
    const parts = parsePartitions(head).sort((a, b) => b.size - a.size);
    const candidates = parts.length ? parts.map((p) => p.offset) : [0];
    const out: number[] = [];
    for (const off of candidates) {
      const m = await readAt(fh, off + EXT_MAGIC_AT, 2);
      if (m.length === 2 && m.readUInt16LE(0) === 0xef53) out.push(off);
    }
    return out;
  } finally {
    await fh.close();
  }
}

const KEYGEN_UNIT = `[Unit]
Description=Make the SSH host keys hostd removed from this clone
ConditionPathExistsGlob=!/etc/ssh/ssh_host_*_key
After=cloud-init.service
Before=ssh.service

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -A

[Install]
WantedBy=multi-user.target
`;

/** debugfs errors that mean "already so" for the commands we send. */
const BENIGN = [/^debugfs \d/, /File not found by ext2_lookup/, /directory already exists/i, /^\s*$/];

function debugfsTarget(raw: string, offset: number): string {
  return offset ? `${raw}?offset=${offset}` : raw;
}

async function debugfs(raw: string, offset: number, cmds: string[], write: boolean): Promise<{ stdout: string; errors: string[] }> {
  const args = write ? ['-w'] : [];
  args.push('-f', '-', debugfsTarget(raw, offset));
  const r = await run('debugfs', args, { input: cmds.join('\n') + '\n', install: 'the e2fsprogs package', timeoutMs: 60_000 });
  const errors = r.stderr.split('\n').filter((l) => !BENIGN.some((re) => re.test(l)));
  return { stdout: r.stdout, errors };
}

async function runningPid(pid: number): Promise<boolean> {
  try {
    return !/\) Z /.test(await fs.readFile(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
}

/** Runs `fn` with the qcow2 `disk` exposed as a writable raw file (qemu-storage-daemon FUSE export). */
export async function withRawExport<T>(disk: string, workDir: string, fn: (raw: string) => Promise<T>): Promise<T> {
  const raw = path.join(workDir, '.export.raw');
  const pidfile = path.join(workDir, '.export.pid');
  await fs.writeFile(raw, '');
  await run(
    'qemu-storage-daemon',
    [
      '--blockdev',
      `driver=file,node-name=f,filename=${disk.replace(/,/g, ',,')}`,
      '--blockdev',
      'driver=qcow2,node-name=d,file=f',
      '--export',
      `type=fuse,id=e,node-name=d,mountpoint=${raw.replace(/,/g, ',,')},writable=on`,
      '--pidfile',
      pidfile,
      '--daemonize',
    ],
    { install: 'the qemu-system-common package (qemu-storage-daemon, with /dev/fuse)', timeoutMs: 30_000 },
  );
  const pid = Number((await fs.readFile(pidfile, 'utf8')).trim());
  try {
    return await fn(raw);
  } finally {
    // SIGTERM makes it flush the qcow2 and unmount the export before it exits.
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      /* already gone */
    }
    // Gone means exited: a zombie (not yet reaped by whoever inherited the daemon) counts as gone.
    const end = Date.now() + 30_000;
    while (Date.now() < end && (await runningPid(pid))) await new Promise((r) => setTimeout(r, 5));
    await fs.rm(raw, { force: true });
    await fs.rm(pidfile, { force: true });
  }
}

/** ext's "needs journal recovery" flag, read from the superblock (pure). */
export function needsRecovery(superblock: Buffer): boolean {
  return superblock.length >= 0x64 && (superblock.readUInt32LE(0x60) & 0x4) !== 0;
}

const HOST_KEYS = ['rsa', 'ecdsa', 'ed25519', 'dsa'].flatMap((t) => [`ssh_host_${t}_key`, `ssh_host_${t}_key.pub`]);

/**
 * Writes the identity into the root filesystem of a stopped VM's disk (one
 * debugfs run in the usual one-root-partition case). NoExtRoot when it has no
 * ext* root.
 */
export async function writeIdentity(disk: string, workDir: string, plan: IdentityPlan): Promise<IdentityResult> {
  return withRawExport(disk, workDir, async (raw) => {
    const candidates = await extFilesystems(raw);
    let root: number | null = candidates.length === 1 ? candidates[0] : null;
    for (const off of candidates.length > 1 ? candidates : []) {
      const probe = await debugfs(raw, off, ['stat /etc/hostname'], false);
      if (probe.stdout.includes('Inode:')) {
        root = off;
        break;
      }
    }
    if (root === null) throw new NoExtRoot('no ext2/3/4 root filesystem with /etc found on the disk');
    const fh = await fs.open(raw, 'r');
    try {
      if (needsRecovery(await readAt(fh, root + 1024, 1024))) {
        throw new Error('the root filesystem was not cleanly unmounted (its journal needs recovery); boot and shut the source down cleanly first');
      }
    } finally {
      await fh.close();
    }
    const tmp = await fs.mkdtemp(path.join(workDir, '.identity-'));
    try {
      const cmds: string[] = [];
      const put = async (target: string, text: string, mode: string) => {
        const src = path.join(tmp, path.basename(target) + '.' + cmds.length);
        await fs.writeFile(src, text, { mode: 0o600 });
        cmds.push(`rm ${target}`, `write ${src} ${target}`, `sif ${target} mode ${mode}`, `sif ${target} uid 0`, `sif ${target} gid 0`);
      };
      await put('/etc/hostname', plan.hostname + '\n', '0100644');
      if (plan.seed !== null) {
        cmds.push('mkdir /etc/svc');
        await put('/etc/svc/seed', plan.seed, '0100600');
      }
      if (plan.rekey) {
        // "uninitialized" makes systemd treat the next boot as a first boot and commit a new id.
        await put('/etc/machine-id', 'uninitialized\n', '0100444');
        cmds.push('rm /var/lib/dbus/machine-id');
        for (const k of HOST_KEYS) cmds.push(`rm /etc/ssh/${k}`);
        cmds.push('mkdir /etc/systemd/system/multi-user.target.wants');
        await put('/etc/systemd/system/hostd-ssh-keygen.service', KEYGEN_UNIT, '0100644');
        cmds.push('rm /etc/systemd/system/multi-user.target.wants/hostd-ssh-keygen.service');
        cmds.push('symlink /etc/systemd/system/multi-user.target.wants/hostd-ssh-keygen.service /etc/systemd/system/hostd-ssh-keygen.service');
      }
      const res = await debugfs(raw, root, cmds, true);
      if (res.errors.length) throw new Error(`debugfs could not write the identity: ${res.errors.slice(0, 3).join('; ')}`);
      return { rootOffset: root };
    } finally {
      await fs.rm(tmp, { recursive: true, force: true });
    }
  });
}
