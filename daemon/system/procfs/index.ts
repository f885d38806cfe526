/** The host probe on Linux: /proc and statfs, sampled CPU usage in the background. */
import type { HostProbe } from '../driver.js';
import { CpuSampler, cpuInfo, diskUsage, loadAverages, measureCpuUsage, readMemory, readUptime } from './probe.js';

export class ProcfsProbe implements HostProbe {
  /** Background CPU sampler; started and stopped with the domain. */
  readonly sampler: CpuSampler;

  constructor(sampleIntervalMs = 2000) {
    this.sampler = new CpuSampler(sampleIntervalMs);
  }

  cpu = cpuInfo;
  memory = readMemory;
  load = loadAverages;
  uptimeSeconds = readUptime;
  diskUsage = diskUsage;

  /** The sampler's figure while it runs; otherwise two samples 100 ms apart (health then answers 100 ms later). */
  async cpuUsagePercent(): Promise<number> {
    const sampled = this.sampler.running ? this.sampler.usagePercent : null;
    return sampled ?? measureCpuUsage(100);
  }

  start(): void {
    this.sampler.start();
  }

  stop(): void {
    this.sampler.stop();
  }
}
