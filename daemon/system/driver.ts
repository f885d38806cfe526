/**
 * What the system domain asks of the host: its CPU, memory, load, uptime and
 * the disk usage of a directory. `procfs/` reads them from Linux's /proc and
 * statfs (with `os` as the fallback where /proc is missing). There is no 503
 * here: health must answer on any host, so nothing is "unavailable".
 */
export interface MemoryFigures {
  total_bytes: number;
  available_bytes: number;
}

export interface DiskUsage {
  total_bytes: number;
  /** Free blocks, including those reserved for root. */
  free_bytes: number;
  /** Free blocks an unprivileged process may use. */
  available_bytes: number;
}

export interface HostProbe {
  /** Logical CPU count and the first CPU's model name. */
  cpu(): { cores: number; model: string };
  /** Busy percentage over the last sampling interval (or measured now when no sample is running). */
  cpuUsagePercent(): Promise<number>;
  memory(): Promise<MemoryFigures>;
  /** 1, 5 and 15 minute load averages, to two decimals. */
  load(): [number, number, number];
  uptimeSeconds(): Promise<number>;
  diskUsage(dir: string): Promise<DiskUsage>;
  /** Starts and stops the background work (the CPU sampler); idempotent. */
  start(): void;
  stop(): void;
}
