import { type VmContext, warmRefusal } from './context.js';

export class VmHostStatus {
  constructor(private readonly c: VmContext) {}

  // ------------------------------------------------------------ host

  async hostStatus() {
    const h = await this.c.driver.host({ fresh: true });
    const programs = h.programs;
    const qemu = programs.find((p) => p.name === 'qemu-system-x86_64');
    const missingList = [...programs, h.fuse].filter((p) => !p.available).map((p) => ({ name: p.name, reason: p.reason }));
    return {
      available: Boolean(qemu?.available) && programs.find((p) => p.name === 'qemu-img')?.available === true,
      accelerator: h.accel.accel,
      accelerator_reason: h.accel.reason,
      kvm: { available: h.accel.accel === 'kvm', reason: h.accel.reason },
      qemu_version: qemu?.version ?? null,
      programs: [...programs, h.fuse],
      missing: missingList,
      refused: await this.refusedResources(),
    };
  }

  /**
   * Resources of /vms that a rule added since they were made refuses (docs/security.md,
   * "Resources made before the rules"): nothing is deleted, the call is refused with
   * the same message, and they are listed here until changed. Owned VMs and warm
   * states (sandboxes) are their owner's to report.
   */
  async refusedResources(): Promise<Array<{ kind: 'vm' | 'warm_state'; id: string; rule: string; refuses: string; message: string }>> {
    const out: Array<{ kind: 'vm' | 'warm_state'; id: string; rule: string; refuses: string; message: string }> = [];
    for (const w of await this.c.records.allWarm()) {
      if (w.owner !== null) continue;
      const why = warmRefusal(w);
      if (why) out.push({ kind: 'warm_state', id: w.id, rule: 'vmgenid', refuses: 'restore', message: why });
    }
    for (const v of await this.c.records.allVms()) {
      if (v.owner !== null) continue;
      const ci = v.cloud_init;
      const bridge = ci.network_type === 'bridged' ? (ci.network_bridge ?? this.c.e.settings.bridge) : null;
      const bridgeWhy = bridge ? this.c.bridgeRefusal(bridge) : null;
      if (bridgeWhy) out.push({ kind: 'vm', id: String(v.vmid), rule: 'vms.allowed_bridges', refuses: 'start', message: `VM ${v.vmid}: ${bridgeWhy}` });
      if ((v.vmgenid ?? null) === null && v.state !== 'creating') {
        const state = await this.c.state(v);
        if (state !== 'stopped') {
          out.push({
            kind: 'vm',
            id: String(v.vmid),
            rule: 'vmgenid',
            refuses: 'warm-state save',
            message: `VM ${v.vmid} is ${state} on a machine without a VM generation ID device (started before hostd added one): its warm states are refused until it is stopped and started again`,
          });
        }
      }
    }
    return out;
  }

  async capacity() {
    const [h, probe, vms] = await Promise.all([this.c.driver.resources(), this.c.driver.host(), this.c.records.allVms()]);
    let runCpu = 0;
    let runMem = 0;
    let running = 0;
    let allCpu = 0;
    let allMem = 0;
    for (const v of vms) {
      allCpu += v.cpu_cores;
      allMem += v.memory_mb;
      if ((await this.c.driver.status(this.c.ref(v.vmid))).running) {
        running++;
        runCpu += v.cpu_cores;
        runMem += v.memory_mb;
      }
    }
    const s = this.c.e.settings;
    // Under TCG each guest also holds its translation cache (about 1 GiB by default).
    const overhead = probe.accel.accel === 'kvm' ? 64 : (s.tcgTbSizeMb ?? 1024);
    const need = s.defaultMemoryMb + overhead;
    const qemuOk = probe.programs.find((p) => p.name === 'qemu-system-x86_64')?.available === true;
    let reason: string | null = null;
    if (!qemuOk) reason = 'qemu-system-x86_64 is not installed';
    else if (h.memoryAvailableMb < need)
      reason = `the host has ${h.memoryAvailableMb} MiB of memory available; a ${s.defaultMemoryMb} MiB VM needs about ${need} MiB with QEMU's overhead`;
    return {
      can_run_another: reason === null,
      reason,
      accelerator: probe.accel.accel,
      next_vm: { cpu_cores: s.defaultCpuCores, memory_mb: s.defaultMemoryMb, memory_needed_mb: need },
      host: { cpu_cores: h.cpuCores, memory_mb: h.memoryTotalMb, memory_available_mb: h.memoryAvailableMb },
      running: { vms: running, cpu_cores: runCpu, memory_mb: runMem },
      allocated: { vms: vms.length, cpu_cores: allCpu, memory_mb: allMem },
      free: { cpu_cores: Math.max(0, h.cpuCores - runCpu), memory_mb: Math.max(0, h.memoryTotalMb - runMem) },
    };
  }
}
