/**
 * Activity: the latest rows of the chosen member's activity log, filtered by
 * category, severity and a search text as GET /activity filters them, and
 * new rows that match at the top as they are written (a live tail on the
 * event stream, no polling). Needs system.read, as GET /activity does.
 */
import { h, mount, when } from '../dom';
import { memberApi } from '../api';
import { openThenRead, type StreamEvent } from '../stream';

interface Row {
  id: string;
  timestamp: string;
  category: string;
  severity: string;
  summary: string;
  target: string;
  actor: string;
  metadata: { transport: string; client?: string };
}
interface Filter {
  category: string;
  severity: string;
  search: string;
}

/** The spec's values (GET /activity `category` and `severity`). */
const CATEGORIES = ['auth', 'user', 'share', 'file', 'storage', 'backup', 'app', 'update', 'license', 'system', 'agent'];
const SEVERITIES = ['info', 'warning', 'critical'];

const rowOf = (r: Row) =>
  h(
    'tr',
    { 'data-id': r.id },
    h('td', {}, when(r.timestamp)),
    h('td', { class: r.severity === 'info' ? '' : 'degraded' }, r.severity),
    h('td', {}, r.actor),
    h('td', {}, r.summary),
    h('td', {}, h('code', {}, r.target)),
    h('td', {}, r.metadata.client ? `${r.metadata.transport} (${r.metadata.client})` : r.metadata.transport),
  );

/** The live tail applies the filter as the server does: exact category and severity, the search text anywhere in summary or target, any case. */
const matches = (f: Filter, r: Row): boolean =>
  (!f.category || r.category === f.category) &&
  (!f.severity || r.severity === f.severity) &&
  (!f.search || r.summary.toLowerCase().includes(f.search.toLowerCase()) || r.target.toLowerCase().includes(f.search.toLowerCase()));

const select = (id: string, values: string[]) =>
  h(
    'select',
    { id },
    h('option', { value: '' }, 'all'),
    values.map((v) => h('option', { value: v }, v)),
  );

export async function activityPage(root: Element): Promise<() => void> {
  const body = h('tbody');
  const live = h('p', { class: 'muted', role: 'status' }, 'Connecting to the event stream…');
  const error = h('p', { class: 'error', role: 'alert' });
  const category = select('activity-category', CATEGORIES);
  const severity = select('activity-severity', SEVERITIES);
  const search = h('input', { id: 'activity-search', type: 'search', autocomplete: 'off' });
  let filter: Filter = { category: '', severity: '', search: '' };

  /** Rows the stream brought while a list was being read: kept when the list answered without them. */
  let arrived: Row[] | null = null;
  const load = async (): Promise<void> => {
    const q = new URLSearchParams({ limit: '50' });
    for (const [k, v] of Object.entries(filter)) if (v) q.set(k, v);
    arrived = [];
    try {
      const first = await memberApi('GET', `/activity?${q}`);
      mount(body);
      for (const r of first.events as Row[]) body.append(rowOf(r));
      for (const r of arrived) if (!body.querySelector(`tr[data-id="${CSS.escape(r.id)}"]`)) body.prepend(rowOf(r));
    } finally {
      arrived = null;
    }
  };
  const form = h(
    'form',
    {
      class: 'inline',
      'aria-label': 'Filter activity',
      onsubmit: async (e: Event) => {
        e.preventDefault();
        filter = { category: category.value, severity: severity.value, search: search.value.trim() };
        error.textContent = '';
        try {
          await load();
        } catch (err) {
          error.textContent = (err as Error).message;
        }
      },
    },
    h('label', { for: 'activity-category' }, 'Category'),
    category,
    h('label', { for: 'activity-severity' }, 'Severity'),
    severity,
    h('label', { for: 'activity-search' }, 'Search'),
    search,
    h('button', { type: 'submit' }, 'Apply filter'),
  );

  mount(
    root,
    h('h2', {}, 'Activity'),
    live,
    form,
    error,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Time', 'Severity', 'Actor', 'Summary', 'Target', 'Transport'].map((t) => h('th', {}, t)),
        ),
      ),
      body,
    ),
  );
  // The stream opens first and the list is read after it: a row written in between is in one or both (shown once).
  return openThenRead(
    'types=activity',
    (e: StreamEvent) => {
      if (e.type !== 'activity') return;
      const r: Row = {
        id: String(e.data.id ?? ''),
        timestamp: e.time,
        category: String(e.data.category ?? ''),
        severity: String(e.data.severity ?? 'info'),
        summary: e.summary,
        target: e.resource,
        actor: e.actor,
        metadata: (e.data.metadata ?? { transport: '' }) as Row['metadata'],
      };
      if (!matches(filter, r) || (r.id && body.querySelector(`tr[data-id="${CSS.escape(r.id)}"]`))) return;
      arrived?.push(r);
      body.prepend(rowOf(r));
    },
    live,
    async () => {
      await load();
    },
    'Live: new rows appear at the top.',
  );
}
