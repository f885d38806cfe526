import { badRequest } from '../lib/errors.js';
import type { NoteSink } from '../lib/caller.js';
import type { ExecResult } from '../lib/exec-output.js';
import { AgentTimeout, type GuestExecOptions } from './driver.js';
import { sleep } from './common.js';
import { agentFailure, type OwnerOpts, type VmContext, type VmState } from './context.js';

/** wait-ready's first ask of the agent, and the most any later one is given. */
const PING_FIRST_MS = 2000;
const PING_MAX_MS = 16_000;

export class VmGuest {
  constructor(private readonly c: VmContext) {}

  /**
   * POST /vms/{id}/exec through the guest agent: the shared ExecResult
   * (daemon/lib/exec-output.ts), each stream cut at EXEC_STREAM_CAP_BYTES in
   * the guest (qemu/exec.ts). Sandboxes use this same path.
   */
  async exec(
    vmid: number,
    command: string,
    timeoutSeconds: number | undefined,
    ctx: NoteSink,
    o: OwnerOpts = {},
    opts: Pick<GuestExecOptions, 'env' | 'cwd' | 'user' | 'input' | 'encoding'> = {},
  ): Promise<{ vmid: number } & ExecResult> {
    const rec = await this.c.vm(vmid, o);
    if (!command.trim()) throw badRequest("argument 'command' must not be empty");
    const t = timeoutSeconds ?? 60;
    if (t < 1 || t > 86400) throw badRequest("argument 'timeout_seconds' must be 1-86400");
    await this.c.requireRunning(rec, 'exec');
    // A VM just resumed from a warm state runs a user's command only with its own identity in place.
    await this.c.identitySet(vmid);
    const t0 = Date.now();
    let r;
    try {
      if (!(await this.c.driver.ping(this.c.ref(vmid), this.c.e.settings.agentTimeoutMs))) throw new AgentTimeout('no answer to guest-ping');
      r = await this.c.driver.exec(this.c.ref(vmid), command, t * 1000, opts);
    } catch (err) {
      throw agentFailure(vmid, err);
    }
    ctx.note({
      summary: `Command run in VM ${vmid} '${rec.name}' ${r.timed_out ? `(timed out after ${t} s)` : `(exit ${r.exit_code})`}${r.truncated ? ', output cut' : ''}`,
      target: `vms/${vmid}`,
      metadata: { vmid, exit_code: r.exit_code, timed_out: r.timed_out, truncated: r.truncated, command_bytes: Buffer.byteLength(command) },
    });
    return { vmid, ...r, duration_ms: Date.now() - t0 };
  }

  /**
   * POST /vms/{id}/wait-ready: running, its identity in place (a VM resumed
   * from a warm state) and the agent answers, or the timeout. Wakes on the
   * VM's state reports and on the end of its identity step; asks the agent
   * every 250 ms only while the VM runs without one (the agent starting has
   * no event). Each ask that times out gives the next one twice the time
   * (2 s up to 16 s): an agent that is up but answers in more than 2 s (a
   * TCG guest on a loaded host) must not be given up on, and reconnected,
   * before each answer, for ever.
   */
  async waitReady(vmid: number, timeoutSeconds: number | undefined, o: OwnerOpts = {}) {
    const t0 = Date.now();
    const end = t0 + (timeoutSeconds ?? 60) * 1000;
    let state: VmState = 'stopped';
    let settingIdentity = false;
    let pingMs = PING_FIRST_MS;
    for (;;) {
      // Taken before the state is read, so that a change reported meanwhile still wakes this wait.
      const next = this.c.states.next(vmid);
      try {
        const rec = await this.c.vm(vmid, o);
        state = await this.c.state(rec);
        settingIdentity = state === 'running' && this.c.settingIdentity(vmid);
        // Only a running VM whose identity step is over has an agent worth asking; otherwise a state change wakes this wait.
        const askAgent = state === 'running' && !settingIdentity;
        if (askAgent) {
          const budget = Math.max(200, Math.min(pingMs, end - Date.now()));
          const asked = Date.now();
          if (await this.c.driver.ping(this.c.ref(vmid), budget)) {
            return { vmid, ready: true, timed_out: false, state, waited_ms: Date.now() - t0, reason: null };
          }
          // Refused at once (QEMU's socket not there yet) is not slow; a whole budget without an answer is.
          if (Date.now() - asked >= budget * 0.9) pingMs = Math.min(pingMs * 2, PING_MAX_MS);
        }
        if (Date.now() >= end) break;
        if (askAgent) await sleep(Math.min(250, Math.max(0, end - Date.now())));
        else await next.wait(Math.min(this.c.e.settings.waitPollMs, Math.max(0, end - Date.now())));
      } finally {
        next.cancel();
      }
    }
    return {
      vmid,
      ready: false,
      timed_out: true,
      state,
      waited_ms: Date.now() - t0,
      reason: settingIdentity
        ? 'the VM was resumed from a warm state and its own identity is still being set'
        : state === 'running'
          ? 'the guest agent did not answer'
          : `the VM is ${state}`,
    };
  }

  /** POST /vms/{id}/wait-ip: an address the agent reports, or the timeout. */
  async waitIp(vmid: number, timeoutSeconds: number | undefined, o: OwnerOpts = {}) {
    const t0 = Date.now();
    const end = t0 + (timeoutSeconds ?? 60) * 1000;
    let state: VmState = 'stopped';
    let reason = '';
    for (;;) {
      const rec = await this.c.vm(vmid, o);
      state = await this.c.state(rec);
      if (rec.cloud_init.network_type === 'none') {
        return { vmid, ip: null, addresses: [], timed_out: false, state, waited_ms: Date.now() - t0, reason: 'the VM has no network (network_type none)' };
      }
      if (state === 'running') {
        try {
          const addrs = await this.c.driver.addresses(this.c.ref(vmid), Math.max(200, Math.min(2000, end - Date.now())));
          if (addrs.length) {
            const ip = (addrs.find((x) => x.family === 'ipv4') ?? addrs[0]).address;
            this.c.addrCache.set(vmid, { at: Date.now(), addresses: addrs.map((x) => x.address) });
            return { vmid, ip, addresses: addrs, timed_out: false, state, waited_ms: Date.now() - t0, reason: null };
          }
          reason = 'the guest has no address yet';
        } catch {
          reason = 'the guest agent did not answer';
        }
      } else reason = `the VM is ${state}`;
      if (Date.now() >= end) break;
      await sleep(Math.min(500, Math.max(0, end - Date.now())));
    }
    return { vmid, ip: null, addresses: [], timed_out: true, state, waited_ms: Date.now() - t0, reason };
  }

  /** GET /vms/{id}/connection: how to SSH in. */
  async connection(vmid: number, o: OwnerOpts = {}) {
    const rec = await this.c.vm(vmid, o);
    const state = await this.c.state(rec);
    const ci = rec.cloud_init;
    let host: string | null = null;
    let port: number | null = 22;
    let reason: string | null = null;
    if (ci.network_type === 'none') {
      port = null;
      reason = 'the VM has no network (network_type none)';
    } else if (ci.network_type === 'user') {
      if (state === 'running' || state === 'paused') {
        host = '127.0.0.1';
        port = rec.ssh_port;
      } else reason = `the VM is ${state}: its SSH port is forwarded while it runs`;
    } else {
      if (ci.ip_address) host = ci.ip_address.split('/')[0];
      else if (state === 'running') {
        try {
          const addrs = await this.c.driver.addresses(this.c.ref(vmid), 2000);
          host = (addrs.find((x) => x.family === 'ipv4') ?? addrs[0])?.address ?? null;
          if (!host) reason = 'the guest reports no address yet';
        } catch {
          reason = 'the guest agent does not answer, so the address is unknown';
        }
      } else reason = `the VM is ${state} and has no static address`;
    }
    return {
      vmid,
      state,
      username: ci.username,
      host,
      port,
      network_type: ci.network_type,
      key_auth: Boolean(ci.ssh_public_key),
      password_auth: ci.ssh_password_auth && ci.password_set,
      ssh_enabled: ci.ssh_enabled,
      command: host && port ? `ssh ${port === 22 ? '' : `-p ${port} `}${ci.username}@${host}` : null,
      reason,
    };
  }
}
