/** POST /vms/{id}/cloud-init: the settings a VM boots with, by the clear rules; the seed is rebuilt at once. */
import { badRequest, conflict } from '../lib/errors.js';
import type { NoteSink } from '../lib/caller.js';
import { checkGateway, withPrefix } from '../../api/registry/schema.js';
import type { CloudInitSettings } from './driver.js';
import { VmRecords, type StoredCloudInit } from './records.js';
import { checkSshKey, checkUsername, now } from './common.js';
import { type CloudInitUpdate, type OwnerOpts, SEED_NS, type VmContext, type VmView } from './context.js';

export class VmCloudInit {
  constructor(private readonly c: VmContext) {}

  // ------------------------------------------------------------ cloud-init

  /** POST /vms/{id}/cloud-init: omitted/null keeps; empty string or array clears; the seed is rebuilt. */
  async cloudInit(vmid: number, a: CloudInitUpdate, ctx: NoteSink, o: OwnerOpts = {}): Promise<{ vm: VmView; applies: 'next boot' }> {
    return this.c.lock.exclusiveOn(
      () => this.c.vm(vmid, o),
      [`vm:${vmid}`],
      'cloud-init update',
      async (rec) => {
        if (rec.state === 'creating') throw conflict(`VM ${vmid} is still being created (task ${rec.task_id})`);
        const ci: StoredCloudInit = { ...rec.cloud_init, dns_servers: [...rec.cloud_init.dns_servers] };
        const changed: string[] = [];
        const set = <K extends keyof CloudInitSettings>(k: K, v: StoredCloudInit[K]) => {
          ci[k] = v;
          changed.push(k);
        };
        if (a.password != null && a.clear_password) throw badRequest("arguments 'password' and 'clear_password' cannot be combined");
        if (a.cloud_init_enabled != null) set('enabled', a.cloud_init_enabled);
        if (a.username != null) set('username', checkUsername(a.username));
        if (a.ssh_public_key != null) set('ssh_public_key', a.ssh_public_key === '' ? null : checkSshKey(a.ssh_public_key));
        if (a.ssh_enabled != null) set('ssh_enabled', a.ssh_enabled);
        if (a.ssh_password_auth != null) set('ssh_password_auth', a.ssh_password_auth);
        if (a.dns_servers != null) set('dns_servers', [...a.dns_servers]);
        if (a.ip_address != null) set('ip_address', a.ip_address === '' ? null : withPrefix(a.ip_address));
        if (a.gateway != null) set('gateway', a.gateway === '' ? null : a.gateway);
        if (a.package_upgrade != null) set('package_upgrade', a.package_upgrade);
        if (a.network_bridge != null) {
          if (a.network_bridge !== '') this.c.requireAllowedBridge(a.network_bridge);
          set('network_bridge', a.network_bridge === '' ? null : a.network_bridge);
        }
        if (a.network_type != null) set('network_type', a.network_type);
        // The pair is checked as it will be stored when the call changes either one.
        if ((a.gateway != null || a.ip_address != null) && ci.gateway && ci.ip_address) checkGateway(ci.gateway, ci.ip_address);
        if (ci.network_type === 'bridged' && !ci.network_bridge && !this.c.e.settings.bridge) {
          throw badRequest("argument 'network_bridge' is needed for network_type 'bridged' (no default bridge is configured)");
        }
        // A resume needs the devices the memory was saved with.
        if (rec.state === 'suspended' && a.network_type != null && (a.network_type === 'none') !== (rec.cloud_init.network_type === 'none')) {
          throw conflict(`VM ${vmid} is suspended: adding or removing its network card needs a stopped VM`);
        }
        let passwordChange: 'set' | 'cleared' | null = null;
        if (a.password != null) {
          if (a.password === '') throw badRequest("argument 'password' must not be empty (use clear_password to remove it)");
          if (a.password.length > 1024) throw badRequest("argument 'password' must be at most 1024 characters");
          await this.c.requirePrograms('openssl');
          await this.c.e.secrets.put(SEED_NS, `password-${vmid}`, await this.c.driver.hashPassword(a.password));
          ci.password_set = true;
          passwordChange = 'set';
        } else if (a.clear_password) {
          await this.c.e.secrets.delete(SEED_NS, `password-${vmid}`);
          ci.password_set = false;
          passwordChange = 'cleared';
        }
        if (passwordChange) changed.push('password');
        ci.generation += 1;
        const key = VmRecords.intentKey(`seed-${vmid}`);
        rec.cloud_init = ci;
        await this.c.records.journal.begin(key, { op: 'seed', vmid });
        await this.c.writeSeed(rec);
        rec.updated_at = now();
        await this.c.records.journal.commit(key, [this.c.records.putVm(rec)]);
        ctx.note({
          summary: `VM ${vmid} '${rec.name}' cloud-init settings updated${changed.length ? ': ' + changed.join(', ') : ''}`,
          target: `vms/${vmid}`,
          metadata: { vmid, changed, password: passwordChange },
        });
        return { vm: await this.c.viewOf(rec), applies: 'next boot' as const };
      },
    );
  }
}
