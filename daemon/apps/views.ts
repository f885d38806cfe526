/**
 * An app as answers show it (the registry's result schema `App`): its record
 * joined with its containers on the engine, and a state read from both and
 * from what holds its lock.
 */
import type { ResultOf } from '../../api/registry/index.js';
import { appKey, type AppsContext } from './context.js';
import type { ContainerSummary } from './driver.js';
import type { AppRecord } from './records.js';
import { refusalOf } from './refusals.js';

export type AppView = ResultOf<'apps_list'>['apps'][number];
export type AppState = AppView['state'];

/** What the lock's holder makes an app's state (a change with a task in flight). */
const BUSY_STATE = new Map<string, AppState>([
  ['move', 'moving'],
  ['compose update', 'updating'],
  ['folders update', 'updating'],
]);

/**
 * `settling`: the state the app settles in once the call holding its lock
 * lets go (what that call's commit reports, written before the release).
 */
export function stateOf(c: AppsContext, r: AppRecord, mine: ContainerSummary[] | null, settling = false): AppState {
  if (r.status === 'installing') return 'installing';
  const busy = !settling && c.lock.busy(appKey(r.app_id));
  const held = busy && BUSY_STATE.get(busy);
  if (held) return held;
  if (!mine) return 'unknown';
  if (!mine.length) return 'not_created';
  const running = mine.filter((x) => x.state === 'running').length;
  if (running === 0) return 'stopped';
  if (running === mine.length) return 'running';
  return 'partial';
}

/** The view of `r` given the engine's containers (null: the engine did not answer). */
export function view(c: AppsContext, r: AppRecord, cs: ContainerSummary[] | null): AppView {
  const mine = cs && cs.filter((x) => x.project === r.project).sort((a, b) => (a.service ?? '').localeCompare(b.service ?? '') || a.name.localeCompare(b.name));
  return {
    app_id: r.app_id,
    name: r.name,
    template_id: r.template_id,
    storage_id: r.storage_id,
    data_dir: r.data_dir,
    project: r.project,
    state: stateOf(c, r, mine),
    desired_state: r.desired_state,
    services: (mine ?? []).map((x) => ({
      service: x.service ?? '',
      container_id: x.container_id,
      name: x.name,
      image: x.image,
      state: x.state,
      status: x.status,
      generation: x.generation,
    })),
    ports: (mine ?? []).flatMap((x) => x.ports.map((p) => ({ service: x.service ?? '', ...p }))),
    folder_assignments: r.folder_assignments,
    compose_sha256: r.compose_sha256,
    generation: r.generation,
    task_id: r.task_id,
    refused: c.refusals.get(r.app_id)?.why ?? null,
    created_at: r.created_at,
    updated_at: r.updated_at,
  };
}

/** The view of one app, reading its containers (and whether its stored file passes today's rules). */
export async function viewOf(c: AppsContext, r: AppRecord): Promise<AppView> {
  if (r.status === 'installed') await refusalOf(c, r).catch(() => null);
  return view(c, r, await c.driver.containers({ project: r.project }));
}
