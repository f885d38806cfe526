/**
 * Tasks: the queued and running tasks of the chosen member, and each task
 * started, progressing and ending while the page is open, all from the event
 * stream (`tasks.*`); no polling. Following one task shows its log: the
 * lines written so far (GET /tasks/{id}/logs), then every new line as its
 * `tasks.log` event arrives, and its end.
 */
import { h, mount, when } from '../dom';
import { memberApi, seg } from '../api';
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

const progressOf = (t: { state: string; progress: number }) => h('progress', { max: 100, value: t.progress, 'aria-label': `${t.progress}% done` });

export async function tasksPage(root: Element): Promise<() => void> {
  const tasks = new Map<string, Task>();
  const body = h('tbody');
  const detail = h('section', { 'aria-label': 'Task log' });
  const live = h('p', { class: 'muted', role: 'status' }, 'Connecting to the event stream…');
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
      h('td', {}, h('button', { type: 'button', 'aria-label': `Follow ${t.title}`, onclick: () => void follow(t.task_id) }, 'Follow')),
    );
  const render = () =>
    mount(
      body,
      tasks.size
        ? [...tasks.values()].sort((a, b) => b.created_at.localeCompare(a.created_at)).map(row)
        : h('tr', {}, h('td', { colspan: 6, class: 'muted' }, 'No task is queued or running.')),
    );
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
    if (!e.type.startsWith('tasks.')) return;
    const d = e.data as Record<string, any>;
    const id = String(d.task_id);
    const known = tasks.get(id);
    const t: Task = {
      task_id: id,
      kind: String(d.kind),
      title: known?.title ?? (e.type === 'tasks.created' ? e.summary.replace(/^task \S+ created: /, '') : String(d.kind)),
      owner: known?.owner ?? e.actor,
      created_at: known?.created_at ?? e.time,
      state: String(d.state),
      progress: Number(d.progress ?? 0),
      finished_at: (d.finished_at as string) ?? null,
      error: (d.error as string) ?? null,
    };
    tasks.set(id, t);
    render();
    if (followed?.id === id) {
      mount(followed.head, h('span', {}, t.title, ': '), headOf(t));
      if (e.type === 'tasks.log') addLine(Number(d.line), String(d.text));
    }
  };

  mount(
    root,
    h('h2', {}, 'Tasks'),
    live,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          ['Task', 'State', 'Progress', 'Started by', 'Created', 'Log'].map((t) => h('th', {}, t)),
        ),
      ),
      body,
    ),
    detail,
  );
  return openThenRead(
    'types=tasks.',
    onEvent,
    live,
    async () => {
      for (const t of (await memberApi('GET', '/tasks')).tasks as Task[]) if (!tasks.has(t.task_id)) tasks.set(t.task_id, t);
      render();
    },
    'Live: tasks appear, progress and end as they happen.',
  );
}
