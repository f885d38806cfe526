/**
 * One page shape for every domain that lists resources with a state (VMs,
 * LXC containers, apps, sandboxes, locations): the list as the API answers
 * it, re-read when the event stream reports a change under the domain's
 * resources (no polling loop), the everyday actions as buttons (only those
 * the signed-in scopes allow; the others are not rendered at all), and a
 * confirmation before a destructive one. An API refusal is shown in the
 * API's own words.
 */
import { confirmAction, coalesce, h, mount, remount, type Child } from '../dom';
import { openThenRead, type StreamEvent } from '../stream';
import { can, type Who } from '../session';
import { createForm, type CreateForm } from '../forms';

export interface Action<T> {
  /** The button's text; its accessible name is `<label> <item name>`. */
  label: string;
  scope: string;
  /** Offered only in the states where it means something. */
  when?: (item: T) => boolean;
  /** Destructive: the question the confirmation asks. */
  confirm?: (item: T) => string;
  run: (item: T) => Promise<unknown>;
}

export interface ResourceSpec<T> {
  title: string;
  intro?: string;
  list: () => Promise<T[]>;
  key: (item: T) => string;
  name: (item: T) => string;
  columns: Array<[string, (item: T) => Child]>;
  /** Event types that can change the list (`lxc.,tasks.ended,activity`). */
  events: string;
  /** Events whose resource starts with this concern the page (`lxc/`). */
  prefix: string;
  actions: Action<T>[];
  empty: string;
  /** Extra blocks above the list (a create form); `refresh` re-reads the list. */
  extra?: (who: Who, refresh: () => Promise<void>, report: (err: unknown) => void) => Child;
  /** A block below the list (a folder's contents). */
  after?: Child;
  /** Create forms above the list, each built from its operation's catalog entry (shown only with its scopes). */
  create?: CreateForm[];
  /** Told of every event the page receives, after the list's own handling (a folder's open contents). */
  also?: (e: StreamEvent) => void;
}

/** A state as text with a class for colour: the word itself carries the meaning. */
export const stateCell = (state: string): HTMLElement => h('span', { class: `state ${state.toLowerCase()}`, 'data-testid': 'state' }, state);

/**
 * Whether an event concerns the domain of `prefix` (`lxc/`): its resource or
 * a task's target lies under it, or it is an activity row of one of the
 * domain's operations (`lxc_…`; folder rows name the folder, not a path).
 */
export function concerns(e: StreamEvent, prefix: string): boolean {
  const target = typeof e.data?.target === 'string' ? (e.data.target as string) : '';
  const operation = (e.data?.metadata as { operation?: unknown } | undefined)?.operation;
  return (
    e.resource.startsWith(prefix) ||
    target.startsWith(prefix) ||
    (e.type === 'activity' && typeof operation === 'string' && operation.startsWith(prefix.replace(/\/$/, '_')))
  );
}

export async function resourcePage<T>(root: Element, who: Who, spec: ResourceSpec<T>): Promise<() => void> {
  const body = h('tbody');
  const error = h('p', { class: 'error', role: 'alert' });
  const live = h('p', { class: 'muted', role: 'status' }, 'Connecting to the event stream…');
  const actions = spec.actions.filter((a) => can(who, a.scope));
  const report = (err: unknown) => {
    error.textContent = (err as Error).message;
  };

  const render = (items: T[]) =>
    remount(
      body,
      items.length
        ? items.map((item) =>
            h(
              'tr',
              { 'data-id': spec.key(item) },
              spec.columns.map(([, cell]) => h('td', {}, cell(item))),
              actions.length
                ? h(
                    'td',
                    { class: 'row-actions' },
                    actions
                      .filter((a) => !a.when || a.when(item))
                      .map((a) => {
                        const name = `${a.label} ${spec.name(item)}`;
                        return h(
                          'button',
                          {
                            type: 'button',
                            class: a.confirm ? 'danger' : '',
                            'aria-label': name,
                            'data-key': name,
                            onclick: async () => {
                              if (a.confirm && !(await confirmAction(a.confirm(item), a.label))) return;
                              error.textContent = '';
                              try {
                                await a.run(item);
                              } catch (err) {
                                report(err);
                              }
                              await refresh();
                            },
                          },
                          a.label,
                        );
                      }),
                  )
                : null,
            ),
          )
        : h('tr', {}, h('td', { colspan: spec.columns.length + 1, class: 'muted' }, spec.empty)),
    );

  let reading = Promise.resolve();
  const refresh = (): Promise<void> =>
    (reading = reading.then(async () => {
      try {
        render(await spec.list());
      } catch (err) {
        report(err);
      }
    }));
  const soon = coalesce(() => void refresh());

  const closers: Array<() => void> = [];
  const forms = h('div', { class: 'forms' });
  mount(
    root,
    h('h2', {}, spec.title),
    spec.intro ? h('p', { class: 'muted' }, spec.intro) : null,
    live,
    error,
    spec.extra?.(who, refresh, report),
    forms,
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          spec.columns.map(([t]) => h('th', {}, t)),
          actions.length ? h('th', {}, 'Actions') : null,
        ),
      ),
      body,
    ),
    spec.after,
  );

  try {
    for (const f of spec.create ?? []) forms.append((await createForm(who, { ...f, done: () => void refresh() }, (c) => closers.push(c))) ?? '');
  } catch (err) {
    report(err);
  }

  const close = await openThenRead(
    spec.events,
    (e) => {
      if (concerns(e, spec.prefix)) soon();
      spec.also?.(e);
    },
    live,
    async () => {
      render(await spec.list());
    },
    'Live: changes appear as they happen.',
  );
  return () => {
    close();
    for (const c of closers.splice(0)) c();
  };
}
