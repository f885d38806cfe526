/**
 * Create forms built from the catalog (GET /api/v1/catalog): the registry
 * states each operation's arguments once, and a form shows one field per
 * argument of its JSON Schema, so a new argument appears here without a
 * change to the console. A form is offered only to a caller holding every
 * scope its operation needs. The server checks every argument: its 400 is
 * shown in the form, in the API's words. A create that runs as a task is
 * followed to its end on the event stream.
 */
import { h, mount, type Child } from './dom';
import { api, memberApi, seg } from './api';
import { openThenRead } from './stream';
import { can, type Who } from './session';

interface Schema {
  type?: string | string[];
  enum?: unknown[];
  description?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  anyOf?: Schema[];
  minimum?: number;
  maximum?: number;
}
interface Entry {
  operation: string;
  method: string;
  path: string;
  summary: string;
  scopes: string[];
  arguments: Schema;
}

let catalog: Promise<Map<string, Entry>> | undefined;
/** The catalog of the host serving the console, read once per tab (every member runs the same build's registry). */
const entries = (): Promise<Map<string, Entry>> =>
  (catalog ??= api('GET', '/catalog').then(
    (c) => new Map((c.endpoints as Entry[]).map((e) => [e.operation, e])),
    (err) => {
      catalog = undefined;
      throw err;
    },
  ));

/** `X or null` is offered as X: leaving the field empty omits it. */
function plain(s: Schema): Schema {
  const inner = s.anyOf?.find((b) => b.type !== 'null');
  if (inner) return { ...inner, description: s.description ?? inner.description };
  return Array.isArray(s.type) ? { ...s, type: s.type.find((t) => t !== 'null'), enum: s.enum?.filter((v) => v !== null) } : s;
}

type Read = () => unknown;
/** One argument's control and how to read its value (undefined: omitted, the server's default applies). */
function field(id: string, name: string, s: Schema, required: boolean, choices?: string[]): [Child, Read] {
  const help = s.description ? h('small', { id: `${id}-help`, class: 'muted' }, s.description) : null;
  const common = { id, name, required, 'aria-describedby': help ? `${id}-help` : null };
  const label = h('label', { for: id }, name);
  const wrap = (control: HTMLElement, note?: string): Child =>
    h('div', { class: 'field' }, label, control, note ? h('small', { class: 'muted' }, note) : null, help);
  const type = s.type as string | undefined;
  const options = choices ?? (s.enum as string[] | undefined) ?? (type === 'boolean' ? ['true', 'false'] : undefined);
  if (options) {
    const sel = h(
      'select',
      common,
      required ? null : h('option', { value: '' }, '(default)'),
      options.map((o) => h('option', { value: String(o) }, o === '' ? '(empty)' : String(o))),
    );
    // An enum may hold '' as a real value: the first option is the "omit" one only when the field is optional.
    const read = () => (!required && sel.selectedIndex === 0 ? undefined : type === 'boolean' ? sel.value === 'true' : sel.value);
    return [wrap(sel), read];
  }
  if (type === 'integer' || type === 'number') {
    const input = h('input', { ...common, type: 'number', step: type === 'integer' ? 1 : 'any', inputmode: 'numeric' });
    return [wrap(input), () => (input.value === '' ? undefined : Number(input.value))];
  }
  if (type === 'array' && s.items && ['string', 'integer', 'number'].includes(plain(s.items).type as string)) {
    const input = h('input', { ...common, type: 'text', autocomplete: 'off' });
    const numeric = plain(s.items).type !== 'string';
    const read = () => {
      const parts = input.value
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean);
      return input.value.trim() === '' ? undefined : parts.map((p) => (numeric ? Number(p) : p));
    };
    return [wrap(input, 'Comma-separated.'), read];
  }
  if (type === 'object' || type === 'array') {
    const area = h('textarea', { ...common, rows: 3, spellcheck: false });
    const read = () => {
      if (area.value.trim() === '') return undefined;
      try {
        return JSON.parse(area.value);
      } catch {
        throw new Error(`${name}: not valid JSON`);
      }
    };
    return [wrap(area, 'JSON.'), read];
  }
  // Free text of several lines (compose files, seeds, keys) by the argument's name; a one-line input would drop newlines.
  const multiline = /_(content|data|key)$/.test(name);
  const secret = /password|secret/.test(name);
  const input = multiline
    ? h('textarea', { ...common, rows: 4, spellcheck: false })
    : h('input', { ...common, type: secret ? 'password' : 'text', autocomplete: secret ? 'new-password' : 'off' });
  return [wrap(input), () => (input.value === '' ? undefined : input.value)];
}

export interface CreateForm {
  /** The operation whose arguments the form offers (`vms_create`). */
  operation: string;
  /** The disclosure's and the form's name (`New VM`) and the submit button's (`Create VM`). */
  title: string;
  submit: string;
  /** Arguments offered as a choice of these values (a proxy entry's domain). */
  choices?: Record<string, string[]>;
  /** Called after a create the server accepted (the page re-reads its list). */
  done?: () => void;
}

/**
 * The form of `spec.operation` for `who`, or null when the caller lacks one
 * of its scopes (a form a token cannot use is not offered). `onLeave` takes
 * what closes a followed task's stream when the page goes.
 */
export async function createForm(who: Who, spec: CreateForm, onLeave: (close: () => void) => void): Promise<HTMLElement | null> {
  const entry = (await entries()).get(spec.operation);
  if (!entry || !entry.scopes.every((s) => can(who, s))) return null;
  const schema = entry.arguments;
  const required = new Set(schema.required ?? []);
  // peer_id is the member picker's; everything else the schema declares is a field, required ones first.
  const names = Object.keys(schema.properties ?? {})
    .filter((n) => n !== 'peer_id')
    .sort((a, b) => Number(required.has(b)) - Number(required.has(a)));
  const reads: Array<[string, Read]> = [];
  const fields = names.map((n) => {
    const [control, read] = field(`${spec.operation}-${n}`, n, plain(schema.properties![n]), required.has(n), spec.choices?.[n]);
    reads.push([n, read]);
    return control;
  });
  const error = h('p', { class: 'error', role: 'alert', id: `${spec.operation}-error` });
  const outcome = h('div', { role: 'status', 'aria-label': `${spec.title}: outcome` });
  const button = h('button', { type: 'submit', class: 'primary' }, spec.submit);

  const submit = async (form: HTMLFormElement) => {
    error.textContent = '';
    mount(outcome);
    const args: Record<string, unknown> = {};
    let path = entry.path.replace(/^\/api\/v1/, '');
    try {
      for (const [n, read] of reads) {
        const v = read();
        if (v !== undefined) args[n] = v;
      }
    } catch (err) {
      error.textContent = (err as Error).message;
      return;
    }
    // Path parameters go into the path, once, encoded; the rest is the body.
    path = path.replace(/\{([a-z_]+)\}/g, (_m, p: string) => {
      const v = args[p];
      delete args[p];
      return seg(String(v ?? ''));
    });
    button.disabled = true;
    try {
      const res = await memberApi(entry.method, path, args);
      form.reset();
      mount(outcome, h('p', {}, `${entry.summary.replace(/\.$/, '')}: accepted.`));
      if (res?.task?.task_id) onLeave(await followTask(String(res.task.task_id), outcome));
      spec.done?.();
    } catch (err) {
      error.textContent = (err as Error).message;
    } finally {
      button.disabled = false;
    }
  };

  const form = h(
    'form',
    {
      'aria-label': spec.title,
      'aria-describedby': error.id,
      onsubmit: (e: Event) => {
        e.preventDefault();
        void submit(e.target as HTMLFormElement);
      },
    },
    fields,
    h('div', { class: 'actions' }, button),
    error,
    outcome,
  );
  return h('details', { class: 'create' }, h('summary', {}, spec.title), form);
}

/**
 * Shows one task to its end: the stream (this task's events only) opens
 * before the task is read, so its end is in the read or arrives after it.
 * Answers what closes the stream; it also closes itself at the task's end.
 */
async function followTask(id: string, into: HTMLElement): Promise<() => void> {
  const line = h('p', { 'data-testid': 'create-task' });
  const live = h('small', { class: 'muted' });
  into.append(line, live);
  let ended = false;
  let close: () => void = () => {};
  const show = (t: { title?: string; kind?: string; state: string; progress?: number; error?: string | null }) => {
    if (ended) return;
    mount(
      line,
      `${t.title ?? t.kind ?? 'Task'}: `,
      h('strong', { 'data-testid': 'create-task-state' }, t.state),
      ` ${t.progress ?? 0}% `,
      h('progress', { max: 100, value: t.progress ?? 0, 'aria-label': `${t.progress ?? 0}% done` }),
      t.error ? h('span', { class: 'error' }, ` ${t.error}`) : null,
    );
    if (t.state === 'succeeded' || t.state === 'failed' || t.state === 'interrupted' || t.state === 'cancelled') {
      ended = true;
      live.textContent = '';
      close();
    }
  };
  close = await openThenRead(
    `types=tasks.&task_id=${encodeURIComponent(id)}`,
    (e) => show(e.data as any),
    live,
    async () => show((await memberApi('GET', `/tasks/${seg(id)}`)).task),
    'Following the task live.',
  );
  if (ended) close();
  return close;
}
