/**
 * Tasks: the queued and running tasks of the chosen member, and each task
 * started, progressing and ending, all from the event stream (`tasks.*`); no
 * polling. GET /tasks lists active tasks only, so the finished ones shown are
 * those the console saw end: the first visit of the page (per member) opens
 * a tasks stream that stays open until sign-out, while other pages are
 * shown too, and keeps the latest RECENT finished tasks in the tab's memory.
 * Following one task shows its log: the lines written so far
 * (GET /tasks/{id}/logs), then every new line as its `tasks.log` event
 * arrives, and its end.
 */
import { h, mount, when } from '../dom';
import { currentMember, memberApi, seg } from '../api';
import { openThenRead, type StreamEvent } from '../stream';

interface Task {
  task_id: string;
  kind: string;
  title: string;
  state: string;
  progress: number;
  owner: string;
  created_at: string;
  finished_at: string | null;
  error: string | null;
}

/** How many finished tasks the page keeps (per member); older ones drop off. */
export const RECENT = 50;
const ACTIVE = new Set(['queued', 'running']);

/** The tasks seen on one member and the stream that keeps them current; pages come and go, it stays. */
interface Tracker {
  tasks: Map<string, Task>;
  /** The open Tasks page, told of each event after the tasks are updated. */
  listeners: Set<(e: StreamEvent) => void>;
  /** The stream's state in words ("Live: …", or why it stopped); moved into the page shown. */
  status: HTMLElement;
  close: () => void;
}
/** Per member ('' is the host serving the console). */
const trackers = new Map<string, Promise<Tracker>>();

/** Closes every tasks stream and forgets what it saw (a sign-out, or a new sign-in: another caller may see other tasks). */
export function forgetTasks(): void {
  for (const t of trackers.values())
    void t.then(
      (x) => x.close(),
      () => undefined,
    );
  trackers.clear();
}

function apply(tasks: Map<string, Task>, e: StreamEvent): void {
  const d = e.data as Record<string, any>;
  const id = String(d.task_id);
  const known = tasks.get(id);
  tasks.set(id, {
    task_id: id,
    kind: String(d.kind),
    title: known?.title ?? (e.type === 'tasks.created' ? e.summary.replace(/^task \S+ created: /, '') : String(d.kind)),
    owner: known?.owner ?? e.actor,
    created_at: known?.created_at ?? e.time,
    state: String(d.state),
    progress: Number(d.progress ?? 0),
    finished_at: (d.finished_at as string) ?? null,
    error: (d.error as string) ?? null,
  });
  // Only the latest RECENT finished tasks are kept; the active ones all are.
  const done = [...tasks.values()].filter((t) => !ACTIVE.has(t.state)).sort((x, y) => (y.finished_at ?? '').localeCompare(x.finished_at ?? ''));
  for (const old of done.slice(RECENT)) tasks.delete(old.task_id);
}

/** The tracker of the chosen member, opened at its first use: the stream first, then GET /tasks, as every live page. */
function tracker(): Promise<Tracker> {
  const key = currentMember() ?? '';
  let t = trackers.get(key);
  if (t) return t;
  t = (async () => {
    const tr: Tracker = {
      tasks: new Map(),
      listeners: new Set(),
      status: h('p', { class: 'muted', role: 'status' }, 'Connecting to the event stream…'),
      close: () => {},
    };
    tr.close = await openThenRead(
      'types=tasks.',
      (e) => {
        if (!e.type.startsWith('tasks.')) return;
        apply(tr.tasks, e);
        for (const l of tr.listeners) l(e);
      },
      tr.status,
      async () => {
        for (const x of (await memberApi('GET', '/tasks')).tasks as Task[]) if (!tr.tasks.has(x.task_id)) tr.tasks.set(x.task_id, x);
      },
      'Live: tasks appear, progress and end as they happen.',
    );
    return tr;
  })();
  trackers.set(key, t);
  t.catch(() => trackers.delete(key));
  return t;
}

const progressOf = (t: { state: string; progress: number }) => h('progress', { max: 100, value: t.progress, 'aria-label': `${t.progress}% done` });

export async function tasksPage(root: Element): Promise<() => void> {
  const tr = await tracker();
  const tasks = tr.tasks;
  const body = h('tbody');
  const doneBody = h('tbody');
  const detail = h('section', { 'aria-label': 'Task log' });
  /** The task whose log is shown, and the last line shown (lines arrive in order; a line is shown once). */
  let followed: { id: string; lastLine: number; log: HTMLElement; head: HTMLElement } | null = null;
  const row = (t: Task) =>
    h(
      'tr',
      { 'data-id': t.task_id },
      h('td', {}, t.title, h('br'), h('code', { class: 'muted' }, t.kind)),
      h('td', {}, h('span', { class: `state ${t.state}`, 'data-testid': 'task-state' }, t.state)),
      h('td', {}, progressOf(t), ` ${t.progress}%`),
      h('td', {}, t.owner),
      h('td', {}, when(t.created_at)),
      h('td', {}, t.finished_at ? when(t.finished_at) : ''),
      h('td', {}, h('button', { type: 'button', 'aria-label': `Follow ${t.title}`, onclick: () => void follow(t.task_id) }, 'Follow')),
    );
  const render = () => {
    const all = [...tasks.values()];
    const active = all.filter((t) => ACTIVE.has(t.state)).sort((a, b) => b.created_at.localeCompare(a.created_at));
    const done = all.filter((t) => !ACTIVE.has(t.state)).sort((a, b) => (b.finished_at ?? '').localeCompare(a.finished_at ?? ''));
    mount(body, active.length ? active.map(row) : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No task is queued or running.')));
    mount(
      doneBody,
      done.length ? done.map(row) : h('tr', {}, h('td', { colspan: 7, class: 'muted' }, 'No task has ended since the Tasks page was first opened.')),
    );
  };
  const headOf = (t: Task) => [
    h('strong', { 'data-testid': 'followed-state' }, t.state),
    ` ${t.progress}% `,
    progressOf(t),
    t.error ? h('span', { class: 'error' }, ` ${t.error}`) : null,
    t.finished_at ? ` (ended ${when(t.finished_at)})` : '',
  ];

  const addLine = (line: number, text: string) => {
    if (!followed || line <= followed.lastLine) return;
    followed.lastLine = line;
    followed.log.append(h('li', { value: line }, text));
  };

  const follow = async (id: string): Promise<void> => {
    const head = h('p', { 'aria-live': 'polite' });
    const log = h('ol', { class: 'log', 'aria-label': 'Log lines' });
    followed = { id, lastLine: 0, log, head };
    mount(detail, h('h3', {}, 'Following a task'), head, log);
    try {
      const { task } = await memberApi('GET', `/tasks/${seg(id)}`);
      tasks.set(id, { ...tasks.get(id), ...task });
      if (followed?.id === id) mount(head, h('span', {}, task.title, ': '), headOf(task));
      let after = 0;
      for (;;) {
        const page = await memberApi('GET', `/tasks/${seg(id)}/logs?after_line=${after}&limit=500`);
        for (const l of page.lines) addLine(l.line, l.text);
        if (page.next_after_line <= after || page.next_after_line >= page.total_lines) break;
        after = page.next_after_line;
      }
    } catch (err) {
      mount(head, h('span', { class: 'error', role: 'alert' }, (err as Error).message));
    }
  };

  const onEvent = (e: StreamEvent) => {
    render();
    const t = tasks.get(String(e.data.task_id));
    if (t && followed?.id === t.task_id) {
      mount(followed.head, h('span', {}, t.title, ': '), headOf(t));
      if (e.type === 'tasks.log') addLine(Number(e.data.line), String(e.data.text));
    }
  };

  const table = (label: string, rows: HTMLElement) =>
    h(
      'table',
      { 'aria-label': label },
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Task', 'State', 'Progress', 'Started by', 'Created', 'Ended', 'Log'].map((t) => h('th', {}, t)),
        ),
      ),
      rows,
    );
  mount(
    root,
    h('h2', {}, 'Tasks'),
    tr.status,
    h('h3', {}, 'Queued and running'),
    table('Queued and running tasks', body),
    h('h3', {}, 'Recently finished'),
    h(
      'p',
      { class: 'muted' },
      `Tasks this console saw end since the Tasks page was first opened after sign-in (the latest ${RECENT}); a reload or sign-out forgets them.`,
    ),
    table('Recently finished tasks', doneBody),
    detail,
  );
  tr.listeners.add(onEvent);
  render();
  return () => tr.listeners.delete(onEvent);
}
