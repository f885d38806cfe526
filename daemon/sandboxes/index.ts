/**
 * The sandboxes domain: disposable VMs owned by the token that made them,
 * started from warm states where one fits. It runs no VM driver of its own:
 * it receives the vms domain's instance in the domain list and uses its VM
 * service (daemon/vms/service.ts, "Service API for other domains").
 * Operations: /sandboxes. Ports: `guests` (kind `sandbox`). Operator commands
 * (hostctl sandbox ...): warm states, exec, the list of every token's sandboxes.
 */
import { opsOf } from '../../api/registry/index.js';
import { defineDomain, type AdminCommand } from '../domain.js';
import { adminArgs } from '../lib/admin-args.js';
import { Periodic } from '../lib/periodic.js';
import { OPERATOR } from '../lib/operator.js';
import { testPause } from '../lib/test-pause.js';
import type { VmsDomain } from '../vms/index.js';
import { sandboxHandlers } from './handlers.js';
import { SandboxRecords } from './records.js';
import { SandboxService } from './service.js';
import { parseSandboxSettings } from './settings.js';

export function sandboxesDomain(vms: VmsDomain) {
  return defineDomain({
    name: 'sandboxes',
    ops: opsOf('sandboxes'),
    async open(deps) {
      const settings = parseSandboxSettings(deps.settings);
      const log = deps.log.child({ domain: 'sandboxes' });
      const vmService = vms.service();
      const records = new SandboxRecords(deps.store);
      const startWatchers: Array<(method: 'warm' | 'cold', seconds: number) => void> = [];
      const svc = new SandboxService({
        records,
        vms: vmService,
        tasks: deps.tasks,
        secrets: deps.secrets,
        settings,
        log,
        env: deps.env,
        pause: testPause(deps.env, 'sandboxes', log),
        events: deps.events,
        onStarted: (method, ms) => {
          for (const watch of startWatchers) watch(method, ms / 1000);
        },
      });
      // No call is served while a destroy a crash interrupted is still open (IntentRecovery, in recover()).
      const r = await svc.recover();
      if (r.destroys || r.boots || r.orphans || r.lost) log.warn(r, 'sandboxes: finished interrupted changes');
      // What changed while hostd was down (a sandbox whose guest powered off meanwhile), once.
      for (const rec of await records.all()) await svc.states.report(rec.id, { actor: 'runtime', reason: 'found-at-open' });
      const prune = new Periodic(
        () => svc.prune(),
        (err) => log.error({ err }, 'sandboxes: pruning tombstones failed'),
      );
      prune.start(3_600_000);
      const warm = new Periodic(
        () => svc.keepWarm(),
        (err) => log.error({ err }, 'sandboxes: keeping warm states failed'),
      );
      if (settings.warmScanMs > 0) warm.start(settings.warmScanMs);

      const operator = { note() {}, caller: { tokenId: OPERATOR, tokenName: OPERATOR, scopes: [], transport: 'api' as const, origin: deps.node.id } };
      const admin: Record<string, AdminCommand> = {
        'GET /admin/sandboxes': async (body) => [200, await svc.listAll(body.include_destroyed === true)],
        // The operator can destroy any token's sandbox (a revoked token's are otherwise unreachable).
        'POST /admin/sandboxes/destroy': async (body) => [200, await svc.destroy(adminArgs(body).str('id', true), operator, { anyOwner: true })],
        'POST /admin/sandboxes/exec': async (body) => {
          const { str, uint } = adminArgs(body);
          return [200, await svc.exec(str('id', true), str('command', true), uint('timeout_seconds'))];
        },
        'POST /admin/sandboxes/warm': async (body) => {
          const { str, uint } = adminArgs(body);
          return [
            201,
            await svc.saveWarm(
              { image_id: str('image_id', true), cpu_cores: uint('cpu_cores'), memory_mb: uint('memory_mb'), disk_gb: uint('disk_gb') },
              OPERATOR,
            ),
          ];
        },
        'GET /admin/sandboxes/warm-states': async () => [200, await svc.warmStates()],
        'DELETE /admin/sandboxes/warm-states': async (body) => [200, await svc.deleteWarm(adminArgs(body).str('warm_state_id', true))],
      };
      return {
        handlers: sandboxHandlers(svc),
        info: async () => {
          const h = await vmService.hostStatus();
          return { name: 'sandboxes', built: true, runtimes: h.programs };
        },
        close: async () => {
          prune.stop();
          warm.stop();
          await svc.close();
        },
        provides: {
          guests: { guests: () => svc.guests() },
          sandboxStarts: { onStart: (watch) => void startWatchers.push(watch) },
        },
        admin,
      };
    },
  });
}
