/**
 * What this host offers VMs: the programs hostd drives, the accelerator, and
 * memory/CPU for the capacity answer.
 *
 * KVM counts only where the CPU really has it: `/dev/kvm` also exists under
 * PVM (a paravirtual KVM inside a VM), where a stock guest kernel never
 * finishes booting with `-enable-kvm`. So: vmx or svm in /proc/cpuinfo, no
 * kvm_pvm module, and a usable /dev/kvm; TCG otherwise.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import { availableAs, missing, type Availability } from '../../lib/availability.js';
import { run, which } from '../../lib/run.js';
import type { AccelInfo, HostProbe, HostResources } from '../driver.js';

export type { AccelInfo, HostProbe, HostResources };

/** The accelerator decision from what the host shows (pure). */
export function chooseAccel(cpuinfo: string, hasDevKvm: boolean, hasPvm: boolean): AccelInfo {
  const flags = /^flags\s*:(.*)$/m.exec(cpuinfo)?.[1] ?? '';
  const hw = /\b(vmx|svm)\b/.test(flags);
  if (hasPvm) return { accel: 'tcg', reason: '/dev/kvm is PVM (kvm_pvm module loaded), which does not boot stock guests: using TCG software emulation' };
  if (!hw) return { accel: 'tcg', reason: 'the CPU shows no vmx or svm flag (no hardware virtualisation): using TCG software emulation' };
  if (!hasDevKvm) return { accel: 'tcg', reason: '/dev/kvm is missing or not usable (load kvm_intel or kvm_amd): using TCG software emulation' };
  return { accel: 'kvm', reason: null };
}

async function exists(p: string): Promise<boolean> {
  try {
    await fs.access(p);
    return true;
  } catch {
    return false;
  }
}

export async function detectAccel(): Promise<AccelInfo> {
  const cpuinfo = await fs.readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  let devKvm = false;
  try {
    const fh = await fs.open('/dev/kvm', 'r+');
    await fh.close();
    devKvm = true;
  } catch {
    devKvm = false;
  }
  return chooseAccel(cpuinfo, devKvm, await exists('/sys/module/kvm_pvm'));
}

/** First version-looking token of a program's `--version` output. */
export function versionOf(text: string): string | null {
  return /(\d+\.\d+(?:\.\d+)?)/.exec(text)?.[1] ?? null;
}

interface ProgramCheck {
  name: string;
  versionArgs: string[] | null;
  install: string;
  /** What hostd uses it for (in the reason when missing). */
  use: string;
}

export const PROGRAMS: ProgramCheck[] = [
  { name: 'qemu-system-x86_64', versionArgs: ['--version'], install: 'qemu-system-x86', use: 'runs the VMs' },
  { name: 'qemu-img', versionArgs: ['--version'], install: 'qemu-utils', use: 'disk images' },
  {
    name: 'qemu-storage-daemon',
    versionArgs: ['--version'],
    install: 'qemu-system-x86',
    use: 'writes a new VM identity (seed, machine-id, SSH keys) before first boot',
  },
  { name: 'debugfs', versionArgs: ['-V'], install: 'e2fsprogs', use: 'writes a new VM identity into ext4 root filesystems' },
  { name: 'genisoimage', versionArgs: ['--version'], install: 'genisoimage', use: 'builds the cloud-init NoCloud seed' },
  { name: 'openssl', versionArgs: ['version'], install: 'openssl', use: 'hashes cloud-init passwords' },
];

async function checkProgram(p: ProgramCheck): Promise<Availability> {
  const at = await which(p.name);
  if (!at) return missing(p.name, `${p.name} is not installed (install the ${p.install} package); it ${p.use}`);
  if (!p.versionArgs) return availableAs(p.name, null);
  try {
    const r = await run(p.name, p.versionArgs, { timeoutMs: 10_000, okCodes: [0, 1] });
    return availableAs(p.name, versionOf(r.stdout + r.stderr));
  } catch (err) {
    return missing(p.name, `${p.name} does not run: ${(err as Error).message}`);
  }
}

export async function probeHost(): Promise<HostProbe> {
  const [accel, programs] = await Promise.all([detectAccel(), Promise.all(PROGRAMS.map(checkProgram))]);
  const fuse = (await exists('/dev/fuse'))
    ? availableAs('/dev/fuse', null)
    : missing('/dev/fuse', '/dev/fuse is missing (load the fuse module): new VMs cannot get their identity written before first boot');
  return { accel, programs, fuse };
}

/** MemTotal and MemAvailable of /proc/meminfo, in MiB (pure). */
export function parseMeminfo(text: string): { totalMb: number; availableMb: number } {
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
  const total = kb('MemTotal');
  let avail = kb('MemAvailable');
  if (Number.isNaN(avail)) avail = kb('MemFree');
  return { totalMb: Math.floor(total / 1024), availableMb: Math.floor(avail / 1024) };
}

export async function hostResources(): Promise<HostResources> {
  const m = parseMeminfo(await fs.readFile('/proc/meminfo', 'utf8'));
  return { cpuCores: os.availableParallelism?.() ?? os.cpus().length, memoryTotalMb: m.totalMb, memoryAvailableMb: m.availableMb };
}

/** This boot of the host (changes on every host boot; hostd restarts keep it). */
export async function bootId(file = '/proc/sys/kernel/random/boot_id'): Promise<string> {
  return (await fs.readFile(file, 'utf8')).trim();
}
