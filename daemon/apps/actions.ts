/**
 * apps_actions: start, stop or restart an app. Idempotent; the action's
 * desired state (`stop` -> stopped, else running) is stored, and updates and
 * moves keep a stopped app stopped.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import { parseCompose } from './compose/model.js';
import { appKey, type AppsContext, type Call } from './context.js';
import { actorOf } from '../lib/operator.js';
import { apply } from './definition.js';
import { COMPOSE, ENGINE } from './driver.js';
import type { AppRecord } from './records.js';
import { requireAccepted, storedError } from './refusals.js';
import { viewOf } from './views.js';

export type AppAction = ArgsOf<'apps_actions'>['action'];

export async function appAction(c: AppsContext, args: ArgsOf<'apps_actions'>, ctx: Call): Promise<ResultOf<'apps_actions'>> {
  await c.ready([ENGINE, COMPOSE]);
  const action = args.action;
  const out = await c.lock.exclusiveOn(
    () => c.installed(args.app_id),
    [appKey(args.app_id)],
    action,
    async (r) => {
      // Stopping is always possible; starting runs the stored definition, which must pass today's rules.
      if (action !== 'stop') await requireAccepted(c, r);
      const after: AppRecord = { ...r, desired_state: action === 'stop' ? 'stopped' : 'running', updated_at: new Date().toISOString() };
      await c.records.begin(r.app_id, { op: 'action', app_id: r.app_id, action, after });
      await runAction(c, action, after);
      // The desired state and the state the action left (`stopped`, `running`...) in one batch.
      await c.states.commit(r.app_id, actorOf(ctx), c.records.commitOps(r.app_id, [c.records.putRecord(after)]));
      ctx.note({ summary: `${action[0].toUpperCase()}${action.slice(1)} app ${r.name}`, target: `apps/${r.app_id}`, metadata: { app_id: r.app_id, action } });
      return { app: await viewOf(c, after), action };
    },
  );
  // Once the lock is free: an engine signal skipped while the call held it (a container dying meanwhile) is not lost.
  await c.states.refresh(args.app_id, actorOf(ctx));
  return out;
}

/** Brings the engine to what the action asks (also what recovery does again for an interrupted action). */
export async function runAction(c: AppsContext, action: AppAction, after: AppRecord): Promise<void> {
  if (action === 'stop') return c.driver.stop(c.ref(after));
  if (action === 'start') {
    // `up` (after a fresh rendering, so confinement is checked again) creates what is missing and starts the rest.
    await apply(c, { record: after, content: await c.records.contentOf(after.app_id) }).catch((err) => {
      throw storedError(after.app_id, err);
    });
    return;
  }
  // Restart: one `compose restart` when every service has its container of this generation;
  // otherwise what exists is restarted and `up` creates the rest.
  const def = { record: after, content: await c.records.contentOf(after.app_id) };
  const cs = await c.driver.containers({ project: after.project });
  if (cs.length) await c.driver.restart(c.ref(after));
  const services = parseCompose(def.content.content, c.env(after), c.contentLabel(after)).services;
  const current = new Set(cs.filter((x) => x.generation === after.generation).map((x) => x.service));
  if (!services.every((s) => current.has(s))) {
    await apply(c, def).catch((err) => {
      throw storedError(after.app_id, err);
    });
  }
}
