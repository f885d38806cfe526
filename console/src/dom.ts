/**
 * A few lines instead of a framework: elements built from plain values.
 * Text goes in as text nodes (never as HTML), so nothing an API answers can
 * become markup or script.
 */
export type Child = Node | string | number | null | undefined | false | Child[];
type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Attrs = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' && 'value' in el) (el as HTMLInputElement).value = String(v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function append(el: Node, children: Child[]): void {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
}

/** Replaces everything inside `el`. */
export function mount(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  append(el, children);
}

/**
 * Asks before a destructive action, in a modal dialog (keyboard: Tab between
 * the two buttons, Escape cancels). Resolves true when confirmed.
 */
export function confirmAction(question: string, confirmLabel: string): Promise<boolean> {
  return new Promise((resolve) => {
    const ok = h('button', { type: 'button', class: 'danger' }, confirmLabel);
    const cancel = h('button', { type: 'button' }, 'Cancel');
    const dlg = h('dialog', { 'aria-label': 'Confirm' }, h('p', {}, question), h('div', { class: 'actions' }, cancel, ok));
    const done = (v: boolean) => {
      dlg.close();
      dlg.remove();
      resolve(v);
    };
    ok.addEventListener('click', () => done(true));
    cancel.addEventListener('click', () => done(false));
    dlg.addEventListener('cancel', (e) => {
      e.preventDefault();
      done(false);
    });
    document.body.appendChild(dlg);
    dlg.showModal();
    cancel.focus();
  });
}

export const when = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString() : 'never');

/**
 * Asks for one value in a modal dialog (a rename, a path): resolves the text,
 * or null when cancelled (Escape or Cancel).
 */
export function askValue(question: string, fieldLabel: string, initial: string, confirmLabel: string): Promise<string | null> {
  return new Promise((resolve) => {
    const input = h('input', { id: 'ask-value', type: 'text', value: initial, autocomplete: 'off', required: true });
    const cancel = h('button', { type: 'button' }, 'Cancel');
    const form = h(
      'form',
      { method: 'dialog' },
      h('p', {}, question),
      h('label', { for: 'ask-value' }, fieldLabel),
      input,
      h('div', { class: 'actions' }, cancel, h('button', { type: 'submit', class: 'primary' }, confirmLabel)),
    );
    const dlg = h('dialog', { 'aria-label': question }, form);
    const done = (v: string | null) => {
      dlg.close();
      dlg.remove();
      resolve(v);
    };
    form.addEventListener('submit', (e) => {
      e.preventDefault();
      done(input.value);
    });
    cancel.addEventListener('click', () => done(null));
    dlg.addEventListener('cancel', (e) => {
      e.preventDefault();
      done(null);
    });
    document.body.appendChild(dlg);
    dlg.showModal();
    input.focus();
    input.select();
  });
}

/**
 * Replaces what is inside `el` and gives the keyboard focus back to the
 * control that had it (same `data-key`), so a live update does not throw a
 * keyboard user out of the table.
 */
export function remount(el: Element, ...children: Child[]): void {
  const key = (document.activeElement as HTMLElement | null)?.dataset?.key;
  mount(el, ...children);
  if (key) (el.querySelector(`[data-key="${CSS.escape(key)}"]`) as HTMLElement | null)?.focus();
}

/** Runs `fn` at most once per `ms` after the last call (many events, one re-read). */
export function coalesce(fn: () => void, ms = 150): () => void {
  let t: ReturnType<typeof setTimeout> | undefined;
  return () => {
    if (t) clearTimeout(t);
    t = setTimeout(() => {
      t = undefined;
      fn();
    }, ms);
  };
}
