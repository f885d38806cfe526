/**
 * The events the daemon's own writers add to their batches: one `activity`
 * event per activity row, and the task runner's `tasks.*` events.
 */
import type { ActivityRow } from '../../api/registry/types.js';
import type { TaskRecord } from '../lib/tasks.js';
import { SYSTEM_ACL, taskAcl } from './filter.js';
import type { NewEvent } from './types.js';

export function activityEvent(row: ActivityRow): NewEvent {
  return {
    type: 'activity',
    domain: 'activity',
    resource: row.target,
    actor: row.actor,
    summary: row.summary,
    time: row.timestamp,
    data: { id: row.id, category: row.category, severity: row.severity, metadata: row.metadata },
    acl: SYSTEM_ACL,
  };
}

/** Longest task log line carried by a `tasks.log` event (the task's log keeps it whole). */
export const TASK_LOG_TEXT_MAX = 2000;
/** Largest task result (as JSON) carried by `tasks.ended`; a larger one is read with tasks_get. */
export const TASK_RESULT_MAX = 4096;
/** `tasks.progress` is sent when the percent reaches a multiple of this (and at 100), not for every change. */
export const PROGRESS_STEP = 5;

function taskEvent(rec: TaskRecord, what: 'created' | 'progress' | 'log' | 'ended', summary: string, data: Record<string, unknown>): NewEvent {
  return {
    type: `tasks.${what}`,
    domain: 'tasks',
    resource: `tasks/${rec.task_id}`,
    actor: rec.owner,
    summary,
    data: { task_id: rec.task_id, kind: rec.kind, target: rec.resource, state: rec.state, progress: rec.progress, ...data },
    acl: taskAcl(rec.kind, rec.owner),
  };
}

export const taskCreated = (rec: TaskRecord): NewEvent => taskEvent(rec, 'created', `task ${rec.kind} created: ${rec.title}`, {});

export const taskProgress = (rec: TaskRecord): NewEvent => taskEvent(rec, 'progress', `task ${rec.kind} at ${rec.progress}%`, {});

export const taskLog = (rec: TaskRecord, line: number, text: string): NewEvent =>
  taskEvent(rec, 'log', `task ${rec.kind} log line ${line}`, {
    line,
    text: text.length > TASK_LOG_TEXT_MAX ? `${text.slice(0, TASK_LOG_TEXT_MAX - 7)}… (cut)` : text,
  });

export function taskEnded(rec: TaskRecord): NewEvent {
  const result = rec.result === null || rec.result === undefined ? null : JSON.stringify(rec.result).length <= TASK_RESULT_MAX ? rec.result : { cut: true };
  return taskEvent(rec, 'ended', `task ${rec.kind} ${rec.state}${rec.error ? `: ${rec.error}` : ''}`, {
    error: rec.error,
    result,
    finished_at: rec.finished_at,
  });
}

/** Whether a progress change from `before` to `after` is worth an event. */
export function progressWorthAnEvent(before: number, after: number): boolean {
  return after === 100 || Math.floor(after / PROGRESS_STEP) !== Math.floor(before / PROGRESS_STEP);
}

/** `members.up` / `members.down`: this member's probe of another one answered again, or stopped answering. */
export function memberEvent(member: { peer_id: string; name: string }, up: boolean): NewEvent {
  return {
    type: up ? 'members.up' : 'members.down',
    domain: 'members',
    resource: `peers/${member.peer_id}`,
    actor: 'admin',
    summary: `member '${member.name}' (${member.peer_id}) is ${up ? 'reachable' : 'unreachable'}`,
    data: { peer_id: member.peer_id, name: member.name, reachable: up },
    acl: SYSTEM_ACL,
  };
}

/** `proxy.holder`: the proxy lease moved (as this member learned it). */
export function holderEvent(holder: string | null, epoch: number): NewEvent {
  return {
    type: 'proxy.holder',
    domain: 'proxy',
    resource: 'proxy',
    actor: 'admin',
    summary: holder ? `the proxy is held by ${holder} (epoch ${epoch})` : `the proxy has no holder (epoch ${epoch})`,
    data: { holder, epoch },
    acl: SYSTEM_ACL,
  };
}
