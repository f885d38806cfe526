/**
 * The test guest for the VM runtime tests: a Debian 12 disk image built from
 * Debian packages (debootstrap minbase with a kernel, GRUB, systemd,
 * qemu-guest-agent, cloud-init and OpenSSH), bootable by SeaBIOS like a cloud
 * image, with a machine-id and SSH host keys baked in (so that re-keying is
 * observable). Built once per machine and cached under
 * `$HOSTD_TEST_CACHE/vms/<recipe hash>/guest.qcow2` (default
 * /var/cache/hostd-test), keyed by a hash of this recipe.
 *
 * No loop device is used: the ext4 filesystem is made with `mkfs.ext4 -d`
 * at a 1 MiB offset inside a raw file, GRUB's boot sector and core image are
 * written in front of it, then the file becomes a qcow2.
 *
 * Run alone: `node dist/test/helpers/vms-guest.js` prints the image path.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { run } from '../../daemon/lib/run.js';

export const CACHE_ROOT = process.env.HOSTD_TEST_CACHE ?? '/var/cache/hostd-test';
const MIRROR = process.env.HOSTD_TEST_DEBIAN_MIRROR ?? 'http://deb.debian.org/debian';

const PACKAGES = [
  'linux-image-amd64',
  'systemd-sysv',
  'udev',
  'kmod',
  'dbus',
  'qemu-guest-agent',
  'cloud-init',
  'cloud-guest-utils',
  'openssh-server',
  'sudo',
  'ifupdown',
  'isc-dhcp-client',
  'iproute2',
  'procps',
  'python3-cffi-backend',
  'locales',
  'grub-pc-bin',
  'netbase',
];

const FS_BYTES = 3 * 1024 ** 3;
const PART_OFFSET = 1024 * 1024;

const FILES: Record<string, string> = {
  'etc/fstab': '/dev/vda1 / ext4 errors=remount-ro 0 1\n',
  'etc/hostname': 'hostd-guest\n',
  'etc/hosts': '127.0.0.1 localhost\n127.0.1.1 hostd-guest\n',
  'etc/default/locale': 'LANG=C.UTF-8\n',
  'etc/network/interfaces': 'source /etc/network/interfaces.d/*\n\nauto lo\niface lo inet loopback\n',
  // Only the NoCloud seed: no probing for cloud metadata services.
  'etc/cloud/cloud.cfg.d/90-hostd-test.cfg': 'datasource_list: [ NoCloud, None ]\n',
  'etc/systemd/journald.conf.d/hostd-test.conf': '[Journal]\nStorage=volatile\n',
  // The agent answers as soon as its port appears instead of after cloud-init's early stages
  // (which order themselves before sysinit.target): wait-ready then means "the agent answers".
  'etc/systemd/system/qemu-guest-agent.service.d/early.conf': '[Unit]\nDefaultDependencies=no\nConflicts=shutdown.target\nBefore=shutdown.target\n',
  // hostd's NoCloud seed is an IDE CD-ROM, whose drivers (ata_piix, sr_mod) udev loads only after the root
  // is mounted, while cloud-init-local starts without waiting for udev: its one look for the seed (blkid) is a
  // race with /dev/sr0 appearing (measured beside a CPU hog: sr0 at 33 s of uptime, the look at 52 s), and a
  // lost race boots the guest without its user, network or hostname settings. It now waits for the CD-ROM
  // first, 60 s at most (an image booted without one then goes on). $$ is systemd's escape for the shell's $.
  'etc/systemd/system/cloud-init-local.service.d/hostd-seed.conf':
    "[Service]\nExecStartPre=-/bin/sh -c 'for n in $$(seq 600); do [ -b /dev/sr0 ] && exit 0; sleep 0.1; done'\n",
  // The initramfs only has to mount a virtio-blk ext4 root: Debian's default (MODULES=most, 36 MB) has
  // udev probe every storage driver under TCG before the root is even looked for. The real root's udev
  // loads what else the VM's devices need (network, CD-ROM seed, generation ID) from /lib/modules.
  'etc/initramfs-tools/conf.d/hostd-test': 'MODULES=list\n',
  'etc/initramfs-tools/modules': 'virtio_pci\nvirtio_blk\next4\ncrc32c_generic\n',
  // cloud-init's modules, minus those for software the guest does not have (snap, LXD, Puppet, Chef, Salt,
  // MCollective, landscape, byobu, fan, rsyslog, GRUB's debconf, keyboard, RMC, RightScale) and the
  // migrator (a new image has nothing to migrate): each one is a Python import and a check at every first
  // boot, seconds under TCG. Everything a user of this image (docs/first-hour.md) may rely on stays: users
  // and keys, SSH and its keys on the console, hostname, passwords, write_files, runcmd, the scripts,
  // packages, phone_home, power_state.
  'etc/cloud/cloud.cfg.d/91-hostd-test-modules.cfg': [
    'cloud_init_modules: [seed_random, bootcmd, write-files, growpart, resizefs, disk_setup, mounts, set_hostname, update_hostname, update_etc_hosts, ca-certs, users-groups, ssh]',
    'cloud_config_modules: [ssh-import-id, locale, set-passwords, apt-pipelining, apt-configure, ntp, timezone, disable-ec2-metadata, runcmd]',
    'cloud_final_modules: [package-update-upgrade-install, write-files-deferred, scripts-vendor, scripts-per-once, scripts-per-boot, scripts-per-instance, scripts-user, ssh-authkey-fingerprints, keys-to-console, install-hotplug, phone-home, final-message, power-state-change]',
    '',
  ].join('\n'),
};

/**
 * Units the tests never use, masked: the e2scrub reaper and pstore (nothing to scrub or collect in a
 * throwaway guest). systemd-logind stays: it is what handles the ACPI power button (the guest has no acpid).
 */
const MASKED = ['e2scrub_reap.service', 'systemd-pstore.service'];

/**
 * The kernel's command line: `quiet`, since every console line is a slow serial write under TCG. The
 * speculative-execution mitigations stay on: docs/first-hour.md builds real VMs' images with this recipe.
 */
const KERNEL_ARGS = 'root=/dev/vda1 ro console=ttyS0,115200n8 quiet';

const recipe = { version: 6, suite: 'bookworm', packages: PACKAGES, files: FILES, masked: MASKED, kernelArgs: KERNEL_ARGS, fsBytes: FS_BYTES };
export const RECIPE_HASH = crypto.createHash('sha256').update(JSON.stringify(recipe)).digest('hex').slice(0, 16);

function log(msg: string): void {
  process.stderr.write(`[vms-guest] ${msg}\n`);
}

/**
 * What makes the lean guest: the same root filesystem with cloud-init off
 * (its own switch, `/etc/cloud/cloud-init.disabled`, read by its systemd
 * generator) and the network card brought up by ifupdown with DHCP instead of
 * by cloud-init's network configuration. For the tests that are not about
 * cloud-init: its stages are Python processes that keep a TCG guest's core
 * busy for a minute or more after the agent answers, at every cold boot.
 */
const LEAN_FILES: Record<string, string> = {
  '/etc/cloud/cloud-init.disabled': '',
  // ifupdown brings the card up when udev announces it (hostd's virtio card is ens3; eth0 without
  // predictable names).
  '/etc/network/interfaces.d/hostd-test-lean': ['allow-hotplug ens3', 'iface ens3 inet dhcp', '', 'allow-hotplug eth0', 'iface eth0 inet dhcp', ''].join('\n'),
};

/**
 * The path of the cached guest image; builds it first when missing (a few
 * minutes). `lean`: the same guest without cloud-init (LEAN_FILES), made from
 * the full one in seconds and cached beside it.
 */
export async function guestImage(kind: 'full' | 'lean' = 'full'): Promise<string> {
  const full = await fullGuestImage();
  if (kind === 'full') return full;
  const lean = path.join(path.dirname(full), 'guest-lean.qcow2');
  if (fs.existsSync(lean)) return lean;
  const work = fs.mkdtempSync(path.join(path.dirname(full), '.lean-'));
  try {
    const raw = path.join(work, 'disk.raw');
    await run('qemu-img', ['convert', '-O', 'raw', full, raw], { timeoutMs: 10 * 60_000 });
    const cmds: string[] = [];
    for (const [target, text] of Object.entries(LEAN_FILES)) {
      const src = path.join(work, `f${cmds.length}`);
      fs.writeFileSync(src, text);
      cmds.push(`rm ${target}`, `write ${src} ${target}`, `sif ${target} mode 0100644`, `sif ${target} uid 0`, `sif ${target} gid 0`);
    }
    const r = await run('debugfs', ['-w', '-f', '-', `${raw}?offset=${PART_OFFSET}`], { input: cmds.join('\n') + '\n', timeoutMs: 60_000 });
    const errors = r.stderr.split('\n').filter((l) => l.trim() && !/^debugfs \d/.test(l) && !/File not found by ext2_lookup/.test(l));
    if (errors.length) throw new Error(`making the lean guest: ${errors.join('; ')}`);
    // Made under a temporary name and renamed: a reader never sees half an image.
    await run('qemu-img', ['convert', '-O', 'qcow2', raw, path.join(work, 'lean.qcow2')], { timeoutMs: 10 * 60_000 });
    fs.renameSync(path.join(work, 'lean.qcow2'), lean);
    log(`lean test guest (no cloud-init) ready: ${lean}`);
    return lean;
  } finally {
    fs.rmSync(work, { recursive: true, force: true });
  }
}

async function fullGuestImage(): Promise<string> {
  const dir = path.join(CACHE_ROOT, 'vms', RECIPE_HASH);
  const image = path.join(dir, 'guest.qcow2');
  if (fs.existsSync(image)) return image;
  fs.mkdirSync(dir, { recursive: true });
  // One builder at a time per machine: a lock directory with the builder's pid.
  const lock = path.join(dir, '.building');
  for (;;) {
    try {
      fs.mkdirSync(lock);
      fs.writeFileSync(path.join(lock, 'pid'), String(process.pid));
      break;
    } catch {
      const pid = Number(fs.readFileSync(path.join(lock, 'pid'), 'utf8').trim() || 0);
      let alive = false;
      try {
        if (pid) process.kill(pid, 0);
        alive = pid > 0;
      } catch {
        alive = false;
      }
      if (!alive) {
        fs.rmSync(lock, { recursive: true, force: true });
        continue;
      }
      if (fs.existsSync(image)) return image;
      await new Promise((r) => setTimeout(r, 2000));
      if (fs.existsSync(image)) return image;
    }
  }
  try {
    if (fs.existsSync(image)) return image;
    await build(dir, image);
    return image;
  } finally {
    fs.rmSync(lock, { recursive: true, force: true });
  }
}

async function build(dir: string, image: string): Promise<void> {
  const work = path.join(dir, 'work');
  const root = path.join(work, 'root');
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  const t0 = Date.now();
  log(`building the test guest in ${dir} (debootstrap from ${MIRROR}; a few minutes, once per machine)`);
  // Downloaded packages are kept (outside the recipe's directory) so that a changed recipe rebuilds quickly.
  const debs = path.join(CACHE_ROOT, 'vms', 'debs');
  fs.mkdirSync(debs, { recursive: true });
  await run('debootstrap', ['--variant=minbase', `--cache-dir=${debs}`, `--include=${PACKAGES.join(',')}`, recipe.suite, root, MIRROR], {
    timeoutMs: 20 * 60_000,
    install: 'the debootstrap package',
  });
  log(`debootstrap done in ${Math.round((Date.now() - t0) / 1000)} s`);
  for (const [rel, text] of Object.entries(FILES)) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), text);
  }
  // The packages' timers would only compete for the guest's single CPU.
  for (const unit of ['apt-daily.timer', 'apt-daily-upgrade.timer', 'e2scrub_all.timer', 'fstrim.timer']) {
    fs.rmSync(path.join(root, 'etc/systemd/system/timers.target.wants', unit), { force: true });
  }
  for (const unit of MASKED) {
    for (const dir of ['multi-user.target.wants', 'sysinit.target.wants']) fs.rmSync(path.join(root, 'etc/systemd/system', dir, unit), { force: true });
    fs.symlinkSync('/dev/null', path.join(root, 'etc/systemd/system', unit));
  }
  // The initramfs again, with the module list above (debootstrap made it with Debian's default).
  await run('chroot', [root, 'update-initramfs', '-u', '-k', 'all'], { timeoutMs: 10 * 60_000 });
  const boot = fs.readdirSync(path.join(root, 'boot'));
  const kernel = boot.find((f) => f.startsWith('vmlinuz-'));
  const initrd = boot.find((f) => f.startsWith('initrd.img-'));
  if (!kernel || !initrd) throw new Error('debootstrap left no kernel or initrd in /boot');
  const grubDir = path.join(root, 'boot/grub');
  fs.mkdirSync(path.join(grubDir, 'i386-pc'), { recursive: true });
  for (const f of fs.readdirSync(path.join(root, 'usr/lib/grub/i386-pc'))) {
    if (f.endsWith('.mod') || f.endsWith('.lst')) fs.copyFileSync(path.join(root, 'usr/lib/grub/i386-pc', f), path.join(grubDir, 'i386-pc', f));
  }
  fs.writeFileSync(
    path.join(grubDir, 'grub.cfg'),
    [
      'set timeout=0',
      'set default=0',
      'serial --unit=0 --speed=115200',
      'terminal_input serial console',
      'terminal_output serial console',
      "menuentry 'Debian' {",
      '  insmod part_msdos',
      '  insmod ext2',
      '  set root=(hd0,msdos1)',
      `  linux /boot/${kernel} ${KERNEL_ARGS}`,
      `  initrd /boot/${initrd}`,
      '}',
      '',
    ].join('\n'),
  );
  await run(
    'chroot',
    [
      root,
      'grub-mkimage',
      '-O',
      'i386-pc',
      '-o',
      '/boot/grub/core.img',
      '-p',
      '(hd0,msdos1)/boot/grub',
      'biosdisk',
      'part_msdos',
      'ext2',
      'normal',
      'linux',
      'configfile',
      'search',
      'echo',
      'serial',
      'terminal',
      'test',
      'boot',
    ],
    { timeoutMs: 60_000 },
  );
  const core = fs.readFileSync(path.join(grubDir, 'core.img'));
  const bootImg = fs.readFileSync(path.join(root, 'usr/lib/grub/i386-pc/boot.img'));
  if (core.length > PART_OFFSET - 512) throw new Error(`GRUB core image is ${core.length} bytes: too big for the gap before the partition`);
  await run('chroot', [root, 'apt-get', 'clean'], { timeoutMs: 60_000 });
  fs.rmSync(path.join(root, 'var/lib/apt/lists'), { recursive: true, force: true });
  fs.mkdirSync(path.join(root, 'var/lib/apt/lists/partial'), { recursive: true });

  const raw = path.join(work, 'disk.raw');
  fs.writeFileSync(raw, '');
  fs.truncateSync(raw, PART_OFFSET + FS_BYTES);
  await run(
    'mkfs.ext4',
    ['-q', '-F', '-L', 'root', '-O', '^metadata_csum_seed,^orphan_file', '-E', `offset=${PART_OFFSET}`, '-d', root, raw, `${FS_BYTES / 1024}k`],
    {
      timeoutMs: 10 * 60_000,
      install: 'the e2fsprogs package',
    },
  );
  // MBR: GRUB's boot code, one bootable Linux partition from 1 MiB, the signature; GRUB's core right after.
  const mbr = Buffer.alloc(512);
  bootImg.copy(mbr, 0, 0, 440);
  const e = 446;
  mbr[e] = 0x80;
  mbr.writeUIntLE(0xfffffe, e + 1, 3);
  mbr[e + 4] = 0x83;
  mbr.writeUIntLE(0xfffffe, e + 5, 3);
  mbr.writeUInt32LE(PART_OFFSET / 512, e + 8);
  mbr.writeUInt32LE(FS_BYTES / 512, e + 12);
  mbr.writeUInt16LE(0xaa55, 510);
  const fd = fs.openSync(raw, 'r+');
  try {
    fs.writeSync(fd, mbr, 0, 512, 0);
    fs.writeSync(fd, core, 0, core.length, 512);
  } finally {
    fs.closeSync(fd);
  }
  await run('qemu-img', ['convert', '-O', 'qcow2', raw, `${image}.tmp`], { timeoutMs: 10 * 60_000, install: 'the qemu-utils package' });
  fs.renameSync(`${image}.tmp`, image);
  fs.rmSync(work, { recursive: true, force: true });
  log(`test guest ready in ${Math.round((Date.now() - t0) / 1000)} s: ${image}`);
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  guestImage().then(
    (p) => process.stdout.write(p + '\n'),
    (err) => {
      process.stderr.write(`${(err as Error).message}\n`);
      process.exit(1);
    },
  );
}

/**
 * Reads a file of the guest's root filesystem (first partition at 1 MiB, as
 * built here) from a qcow2 without booting it: a read-only FUSE export by
 * qemu-storage-daemon, then debugfs. Works on a disk a running VM uses as a
 * backing file. null when the file does not exist.
 */
export async function readGuestFile(qcow2: string, guestPath: string): Promise<string | null> {
  const dir = fs.mkdtempSync('/tmp/hostd-vms-read-');
  const raw = path.join(dir, 'disk.raw');
  const pidfile = path.join(dir, 'qsd.pid');
  fs.writeFileSync(raw, '');
  try {
    await run(
      'qemu-storage-daemon',
      [
        '--blockdev',
        `driver=file,node-name=f,filename=${qcow2},read-only=on`,
        '--blockdev',
        'driver=qcow2,node-name=d,file=f,read-only=on',
        '--export',
        `type=fuse,id=e,node-name=d,mountpoint=${raw},writable=off`,
        '--pidfile',
        pidfile,
        '--daemonize',
      ],
      { timeoutMs: 30_000 },
    );
    const pid = Number(fs.readFileSync(pidfile, 'utf8').trim());
    try {
      const r = await run('debugfs', ['-R', `cat ${guestPath}`, `${raw}?offset=${PART_OFFSET}`], { timeoutMs: 60_000 });
      if (/File not found/.test(r.stderr)) return null;
      return r.stdout;
    } finally {
      process.kill(pid, 'SIGTERM');
      for (let i = 0; i < 2000; i++) {
        try {
          if (/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'))) break;
        } catch {
          break;
        }
        await new Promise((r) => setTimeout(r, 5));
      }
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
