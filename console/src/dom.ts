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
