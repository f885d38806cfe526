/**
 * Activity: the latest rows of this host's activity log, and new ones as they
 * are written (a live tail on the event stream, no polling). Needs
 * system.read, as GET /activity does.
 */
import { h, mount, when } from '../dom';
import { memberApi } from '../api';
import { openStream, type StreamEvent } from '../stream';

interface Row { id: string; timestamp: string; severity: string; summary: string; target: string; actor: string; metadata: { transport: string; client?: string } }

const rowOf = (r: Row) => h('tr', { 'data-id': r.id },
  h('td', {}, when(r.timestamp)),
  h('td', { class: r.severity === 'info' ? '' : 'degraded' }, r.severity),
  h('td', {}, r.actor),
  h('td', {}, r.summary),
  h('td', {}, h('code', {}, r.target)),
  h('td', {}, r.metadata.client ? `${r.metadata.transport} (${r.metadata.client})` : r.metadata.transport));

export async function activityPage(root: Element): Promise<() => void> {
  const body = h('tbody');
  const live = h('p', { class: 'muted', role: 'status' }, 'Connecting to the event stream…');
  mount(root,
    h('h2', {}, 'Activity'),
    live,
    h('table', {}, h('thead', {}, h('tr', {}, ['Time', 'Severity', 'Actor', 'Summary', 'Target', 'Transport'].map((t) => h('th', {}, t)))), body));
  // The stream opens first and the list is read after it: a row written in between is in one or both (shown once).
  let opened: () => void = () => {};
  const ready = new Promise<void>((r) => (opened = r));
  const close = openStream('types=activity', (e: StreamEvent) => {
    if (e.type !== 'activity') return;
    const id = String(e.data.id ?? '');
    if (id && body.querySelector(`tr[data-id="${CSS.escape(id)}"]`)) return;
    body.prepend(rowOf({
      id, timestamp: e.time, severity: String(e.data.severity ?? 'info'), summary: e.summary, target: e.resource, actor: e.actor,
      metadata: (e.data.metadata ?? { transport: '' }) as Row['metadata'],
    }));
  }, (message) => {
    live.textContent = `Live updates stopped: ${message}`;
    opened();
  }, () => opened());
  await ready;
  const first = await memberApi('GET', '/activity?limit=50');
  for (const r of first.events as Row[]) if (!body.querySelector(`tr[data-id="${CSS.escape(r.id)}"]`)) body.append(rowOf(r));
  if (!live.textContent?.startsWith('Live updates stopped')) live.textContent = 'Live: new rows appear at the top.';
  return close;
}
