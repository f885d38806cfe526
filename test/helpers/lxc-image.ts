/**
 * The LXC test image: a busybox rootfs whose init is a small shell script
 * (starts in milliseconds; the halt signal ends it at once, so stops are
 * fast). Built once per machine and cached outside the repository under
 * `$HOSTD_TEST_CACHE/lxc/<hash of the recipe>/` (default /var/cache/hostd-test),
 * as `rootfs.tar.xz`, plus `meta.tar.xz` for `lxc-create -t local` (bench).
 */
import crypto from 'node:crypto';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const BUSYBOX = '/bin/busybox';

const INIT = `#!/bin/sh
# hostd test image init: quick to start; the halt signal (SIGPWR) ends it at once.
trap 'exit 0' PWR TERM USR1 USR2 INT
mount -t tmpfs tmpfs /run 2>/dev/null
[ -f /etc/hostname ] && hostname -F /etc/hostname 2>/dev/null
while :; do sleep 3600 & wait $!; done
`;

const RECIPE_VERSION = '1';

export interface TestImage {
  rootfs: string;
  meta: string;
  sha256: string;
  size: number;
}

export function cacheRoot(): string {
  return path.join(process.env.HOSTD_TEST_CACHE ?? '/var/cache/hostd-test', 'lxc');
}

export function haveBusybox(): boolean {
  return fs.existsSync(BUSYBOX);
}

/** Builds (or finds) the busybox test image; returns its files. */
export function busyboxImage(): TestImage {
  const bb = fs.readFileSync(BUSYBOX);
  const hash = crypto.createHash('sha256').update(RECIPE_VERSION).update(INIT).update(bb).digest('hex').slice(0, 16);
  const dir = path.join(cacheRoot(), `busybox-${hash}`);
  const rootfs = path.join(dir, 'rootfs.tar.xz');
  const meta = path.join(dir, 'meta.tar.xz');
  if (!fs.existsSync(rootfs) || !fs.existsSync(meta)) {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'hostd-lxc-image-'));
    try {
      const R = path.join(work, 'R');
      for (const d of ['bin', 'sbin', 'etc/network', 'proc', 'sys', 'dev', 'tmp', 'root', 'run', 'usr/bin', 'usr/sbin', 'var/run'])
        fs.mkdirSync(path.join(R, d), { recursive: true });
      fs.chmodSync(path.join(R, 'tmp'), 0o1777);
      fs.copyFileSync(BUSYBOX, path.join(R, 'bin/busybox'));
      fs.chmodSync(path.join(R, 'bin/busybox'), 0o755);
      execFileSync('chroot', [R, '/bin/busybox', '--install', '-s']);
      fs.rmSync(path.join(R, 'sbin/init'), { force: true });
      fs.writeFileSync(path.join(R, 'sbin/init'), INIT, { mode: 0o755 });
      fs.writeFileSync(path.join(R, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n');
      fs.writeFileSync(path.join(R, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
      fs.writeFileSync(path.join(R, 'etc/hostname'), 'busybox\n');
      fs.mkdirSync(dir, { recursive: true });
      execFileSync('tar', ['-C', R, '--numeric-owner', '--owner=0', '--group=0', '-cJf', rootfs + '.tmp', '.']);
      const M = path.join(work, 'M');
      fs.mkdirSync(M);
      fs.writeFileSync(path.join(M, 'config'), 'lxc.include = /usr/share/lxc/config/common.conf\n');
      fs.writeFileSync(path.join(M, 'excludes-user'), '');
      execFileSync('tar', ['-C', M, '-cJf', meta + '.tmp', '.']);
      fs.renameSync(rootfs + '.tmp', rootfs);
      fs.renameSync(meta + '.tmp', meta);
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  }
  const buf = fs.readFileSync(rootfs);
  return { rootfs, meta, sha256: crypto.createHash('sha256').update(buf).digest('hex'), size: buf.length };
}
