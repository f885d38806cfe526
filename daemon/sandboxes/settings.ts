import os from 'node:os';

/**
 * The `sandboxes:` section of the config file, validated. Every key is optional.
 *
 *   sandboxes:
 *     default_cpu_cores: 1            # for a create that omits resources.cpu_cores (at least the image's minimum)
 *     default_memory_mb: 1024         # for an omitted resources.memory_mb (at least the image's minimum)
 *     default_disk_gb: 0              # for an omitted resources.disk_gb; 0: the image's own size
 *     max_per_token: 10               # live sandboxes one token may hold (409 beyond)
 *     max_memory_mb_per_token: 16384  # their total memory (409 beyond)
 *     host_reserve_mb: 1024           # memory the capacity check keeps free for the host
 *     boot_timeout_seconds: 600       # a cold boot whose guest agent has not answered by then fails
 *     tombstone_days: 30              # destroyed sandboxes are listed (include_destroyed) this long
 *     warm_label: hostd.sandbox/warm  # images and templates with this label set to "true" get a warm state
 *     warm_scan_seconds: 300          # how often to look for such images without one (0: never)
 *     wait_poll_seconds: 5            # POST /sandboxes/{id}/wait wakes on the sandbox's changes and state
 *                                     #   events; this is how often it looks again without one (a safety net)
 *     fork_resume_concurrency: N      # fork copies that resume at once, across all forks (the others wait
 *                                     #   `booting`); default half the host's CPU cores, at least 1
 *     fork_max_guests: 0              # a fork copy begins to resume only while fewer sandbox guests than this
 *                                     #   run on the host (it waits `booting` for one to go); 0: no such bound
 */
export interface SandboxSettings {
  defaultCpuCores: number;
  defaultMemoryMb: number;
  defaultDiskGb: number;
  maxPerToken: number;
  maxMemoryMbPerToken: number;
  hostReserveMb: number;
  bootTimeoutMs: number;
  tombstoneMs: number;
  warmLabel: string;
  warmScanMs: number;
  waitPollMs: number;
  forkResumeConcurrency: number;
  forkMaxGuests: number;
}

const KEYS = [
  'default_cpu_cores',
  'default_memory_mb',
  'default_disk_gb',
  'max_per_token',
  'max_memory_mb_per_token',
  'host_reserve_mb',
  'boot_timeout_seconds',
  'tombstone_days',
  'warm_label',
  'warm_scan_seconds',
  'wait_poll_seconds',
  'fork_resume_concurrency',
  'fork_max_guests',
];

/**
 * A resume loads the whole saved memory and, under TCG, runs the guest on a
 * host core from its first instruction: more resumes at once than half the
 * cores starve the parent (which runs on) and every other guest of the host.
 */
export const defaultForkResumeConcurrency = (cpus = os.availableParallelism()): number => Math.max(1, Math.floor(cpus / 2));

export function parseSandboxSettings(raw: unknown): SandboxSettings {
  const s = (raw ?? {}) as Record<string, unknown>;
  if (typeof s !== 'object' || Array.isArray(s)) throw new Error('config: sandboxes must be a mapping');
  for (const k of Object.keys(s)) if (!KEYS.includes(k)) throw new Error(`config: sandboxes.${k} is not a known setting (known: ${KEYS.join(', ')})`);
  const int = (k: string, def: number, min: number, max: number): number => {
    const v = s[k];
    if (v === undefined || v === null) return def;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new Error(`config: sandboxes.${k} must be an integer ${min}-${max}`);
    return v;
  };
  const label = s.warm_label ?? 'hostd.sandbox/warm';
  if (typeof label !== 'string' || !label) throw new Error('config: sandboxes.warm_label must be a non-empty string');
  return {
    defaultCpuCores: int('default_cpu_cores', 1, 1, 255),
    defaultMemoryMb: int('default_memory_mb', 1024, 64, 16 * 1024 * 1024),
    defaultDiskGb: int('default_disk_gb', 0, 0, 65536),
    maxPerToken: int('max_per_token', 10, 1, 100_000),
    maxMemoryMbPerToken: int('max_memory_mb_per_token', 16384, 64, 1024 * 1024 * 1024),
    hostReserveMb: int('host_reserve_mb', 1024, 0, 16 * 1024 * 1024),
    bootTimeoutMs: int('boot_timeout_seconds', 600, 5, 86400) * 1000,
    tombstoneMs: int('tombstone_days', 30, 1, 3650) * 86_400_000,
    warmLabel: label,
    warmScanMs: int('warm_scan_seconds', 300, 0, 86400) * 1000,
    waitPollMs: int('wait_poll_seconds', 5, 1, 86400) * 1000,
    forkResumeConcurrency: int('fork_resume_concurrency', defaultForkResumeConcurrency(), 1, 16),
    forkMaxGuests: int('fork_max_guests', 0, 0, 10_000),
  };
}
