/**
 * The VMs domain: VMs on QEMU (one process each, QMP and the guest agent over
 * unix sockets), their images, templates and warm states. Operations: /vms
 * and /templates. Ports: `guests` (GET /system/allocation, the proxy).
 * Operator commands (hostctl vm ...): image import and fetch.
 *
 * `vmsDomain()` makes one instance of the domain. Other domains that run VMs
 * (sandboxes) receive that instance in the domain list (daemon/domains.ts)
 * and call the service API documented at the top of service.ts through its
 * `service()` once it is open: no module-level state, so two daemons in one
 * process keep their VMs apart.
 */
import crypto from 'node:crypto';
import path from 'node:path';
import { opsOf } from '../../api/registry/index.js';
import { defineDomain, type AdminCommand, type DomainDef, type ResourceUsage } from '../domain.js';
import { unavailable } from '../lib/errors.js';
import { adminArgs } from '../lib/admin-args.js';
import { OPERATOR } from '../lib/operator.js';
import { testPause } from '../lib/test-pause.js';
import { qemuDriver } from './qemu/index.js';
import { VmRecords, type VmIntent } from './records.js';
import { parseVmSettings } from './settings.js';
import { VmService } from './service.js';
import { TEMPLATE_BUILD_OWNER } from './context.js';
import { ImageService, type ImportInput } from './images.js';
import { TemplateBuilder } from './templates.js';
import { vmHandlers } from './handlers.js';
import { describeIntent, reconcileCreating, settle } from './recovery.js';
import { IntentRecovery } from '../lib/recovery.js';
import type { VmDriver } from './driver.js';

export type { VmService } from './service.js';
export type { ImageService } from './images.js';

/** Socket paths must fit in 108 bytes: a long data dir moves the run directory to /run. */
function runBaseFor(dataDir: string): string {
  const base = path.join(dataDir, 'run');
  if (path.join(base, 'vm-999999999', 'qmp.sock').length <= 100) return base;
  return `/run/hostd-vms-${crypto.createHash('sha256').update(dataDir).digest('hex').slice(0, 12)}`;
}

const VM_OPS = opsOf('vms', 'templates');

/**
 * The usage port (metrics, read when scraped): the figures of each running
 * VM the guests port lists (VMs of /vms and template builds). VMs another
 * domain owns (sandboxes) are left out: that domain counts them as
 * aggregates and never shows one by id.
 */
async function vmUsage(vms: VmService): Promise<ResourceUsage[]> {
  const read = vms.driver.usage?.bind(vms.driver);
  if (!read) return [];
  const out: ResourceUsage[] = [];
  for (const rec of await vms.records.allVms()) {
    const owner = rec.owner ?? null;
    if ((owner !== null && owner !== TEMPLATE_BUILD_OWNER) || rec.state === 'creating') continue;
    // One VM whose QEMU does not answer leaves out its own figures, not the others'.
    const u = await read(vms.ref(rec.vmid)).catch(() => null);
    if (!u) continue;
    out.push({
      id: String(rec.vmid),
      cpu_seconds: u.cpuSeconds,
      memory_bytes: u.memoryBytes,
      disk_read_bytes: u.diskReadBytes,
      disk_written_bytes: u.diskWrittenBytes,
      network_received_bytes: u.networkReceivedBytes,
      network_transmitted_bytes: u.networkTransmittedBytes,
    });
  }
  return out;
}

/** One instance of the VM domain, and what other domains reach of it once it is open. */
export type VmsDomain = DomainDef<(typeof VM_OPS)[number]> & {
  /** The open VM service (503 while this instance is not open): the entry point for other domains. */
  service(): VmService;
  /** The open image service (listing images a VM or sandbox can boot from). */
  images(): ImageService;
};

/** `makeDriver`: a driver other than QEMU, for tests of service rules (runtime tests use the real one). */
export function vmsDomain(opts: { makeDriver?: () => VmDriver } = {}): VmsDomain {
  let open: { vms: VmService; images: ImageService } | null = null;
  const def = defineDomain({
    name: 'vms',
    ops: VM_OPS,
    async open(deps) {
      const settings = parseVmSettings(deps.settings, deps.config.pools);
      const records = new VmRecords(deps.store);
      const diskRoots = deps.config.pools.map((p) => path.join(p.path, '.vms'));
      const qemu = opts.makeDriver ? null : qemuDriver({ diskRoots });
      const driver = qemu ?? opts.makeDriver!();
      const log = deps.log.child({ domain: 'vms' });
      const resumeWatchers: Array<(seconds: number) => void> = [];
      const vms = new VmService({
        records,
        driver,
        files: qemu?.files,
        tasks: deps.tasks,
        secrets: deps.secrets,
        settings,
        pools: deps.config.pools,
        dataDir: deps.config.dataDir,
        runBase: runBaseFor(deps.config.dataDir),
        log,
        env: deps.env,
        pause: testPause(deps.env, 'vms', log),
        events: deps.events,
        onWarmResume: (ms) => {
          for (const watch of resumeWatchers) watch(ms / 1000);
        },
      });
      const images = new ImageService(vms);
      const templates = new TemplateBuilder(vms, images);
      // No call is served while a change a crash interrupted is still open.
      await new IntentRecovery<VmIntent>({
        domain: 'vms',
        journal: records.journal,
        log,
        settle: (_key, intent) => settle(vms, intent),
        reconcile: () => reconcileCreating(vms),
        describe: describeIntent,
      }).run();
      // After recovery (records settled): what changed while hostd was down, and a watch on each running VM.
      await vms.states.open();
      await images.catalog().catch((err) => log.error({ err }, 'vms: the image catalog could not be read'));
      // Autostart after a host boot runs in the background: hostd must not wait for guests.
      void vms.autostart(deps.env.HOSTD_VMS_BOOT_ID_FILE).then(
        (ids) => ids.length && log.info({ vmids: ids }, 'vms: autostarted after host boot'),
        (err) => log.error({ err }, 'vms: autostart failed'),
      );
      open = { vms, images };
      const admin = () => ({ note() {}, caller: { tokenName: OPERATOR } });
      const commands: Record<string, AdminCommand> = {
        'POST /admin/vms/images/import': async (body) => {
          const { str, uint } = adminArgs(body);
          const input: ImportInput = {
            file: str('file', true),
            image_id: str('image_id', true),
            storage_id: str('storage_id'),
            name: str('name'),
            default_user: str('default_user') ?? null,
          };
          for (const k of ['min_cpu_cores', 'min_memory_mb', 'min_disk_gb'] as const) {
            const v = uint(k);
            if (v !== undefined) input[k] = v;
          }
          return [201, await images.import(input, admin())];
        },
        'POST /admin/vms/images/fetch': async (body) => {
          const { str } = adminArgs(body);
          return [201, await images.fetch(str('image_id', true), str('storage_id'), admin())];
        },
        'GET /admin/vms/images': async () => [200, await images.list()],
      };
      return {
        handlers: vmHandlers(vms, images, templates),
        info: async () => {
          const h = await driver.host();
          return { name: 'vms', built: true, runtimes: [...h.programs, h.fuse] };
        },
        close: async () => {
          vms.close();
          open = null;
        },
        provides: {
          guests: { guests: () => vms.guests() },
          usage: { kind: 'vm', usage: () => vmUsage(vms) },
          warmResumes: { onResume: (watch) => void resumeWatchers.push(watch) },
        },
        admin: commands,
      };
    },
  });
  return Object.assign(def, {
    service(): VmService {
      if (!open) throw unavailable('the vms domain is not open');
      return open.vms;
    },
    images(): ImageService {
      if (!open) throw unavailable('the vms domain is not open');
      return open.images;
    },
  });
}
