/**
 * Access tokens (System, then Agent access, in the spec's words): create one
 * with a name and scope checkboxes (the secret is shown once), list them with
 * their last use, revoke one after a confirmation. Administrator only: the
 * API refuses these calls to every token.
 */
import { confirmAction, h, mount, when } from '../dom';
import { api } from '../api';

interface TokenInfo {
  id: string;
  name: string;
  scopes: string[];
  created_at: string;
  last_used_at: string | null;
}

/** Every scope an operation of this build names (from the catalog): one checkbox each. */
async function knownScopes(): Promise<string[]> {
  const cat = await api('GET', '/catalog');
  const set = new Set<string>();
  for (const e of cat.endpoints as Array<{ scopes: string[] }>) for (const s of e.scopes) set.add(s);
  return [...set].sort();
}

export async function tokensPage(root: Element): Promise<void> {
  const [scopes, list] = await Promise.all([knownScopes(), api('GET', '/tokens')]);
  const name = h('input', { id: 'token-name', type: 'text', required: true, maxlength: 64, autocomplete: 'off' });
  const boxes = scopes.map((s) => h('input', { type: 'checkbox', id: `scope-${s}`, value: s }));
  const error = h('p', { class: 'error', role: 'alert' });
  const created = h('div', { 'aria-live': 'polite' });
  const table = h('tbody');

  const render = (tokens: TokenInfo[]) =>
    mount(
      table,
      tokens.length
        ? tokens.map((t) =>
            h(
              'tr',
              {},
              h('td', {}, t.name),
              h('td', {}, t.scopes.join(', ') || '(none)'),
              h('td', {}, when(t.created_at)),
              h('td', {}, when(t.last_used_at)),
              h(
                'td',
                {},
                h(
                  'button',
                  {
                    type: 'button',
                    class: 'danger',
                    'aria-label': `Revoke ${t.name}`,
                    onclick: async () => {
                      if (!(await confirmAction(`Revoke token '${t.name}'? Its secret stops working at once.`, 'Revoke'))) return;
                      try {
                        await api('DELETE', `/tokens/${encodeURIComponent(t.name)}`);
                        await refresh();
                      } catch (err) {
                        error.textContent = (err as Error).message;
                      }
                    },
                  },
                  'Revoke',
                ),
              ),
            ),
          )
        : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'No tokens yet.')),
    );
  const refresh = async () => render((await api('GET', '/tokens')).tokens);

  const form = h(
    'form',
    {
      onsubmit: async (e: Event) => {
        e.preventDefault();
        error.textContent = '';
        try {
          const out = await api('POST', '/tokens', { name: name.value.trim(), scopes: boxes.filter((b) => b.checked).map((b) => b.value) });
          mount(
            created,
            h(
              'div',
              { class: 'secret' },
              h('p', {}, `Token '${out.token.name}' created. Copy its secret now: it is shown only this once.`),
              h('label', { for: 'token-secret' }, 'Token secret'),
              h('input', { id: 'token-secret', type: 'text', readonly: true, value: out.secret }),
            ),
          );
          name.value = '';
          for (const b of boxes) b.checked = false;
          await refresh();
        } catch (err) {
          error.textContent = (err as Error).message;
        }
      },
    },
    h('div', {}, h('label', { for: 'token-name' }, 'Name'), name),
    h(
      'fieldset',
      {},
      h('legend', {}, 'Scopes'),
      scopes.map((s, i) => h('label', { class: 'check', for: `scope-${s}` }, boxes[i], s)),
    ),
    h('div', {}, h('button', { type: 'submit', class: 'primary' }, 'Create token')),
  );

  mount(
    root,
    h('h2', {}, 'Access tokens'),
    h('p', { class: 'muted' }, 'Tokens for agents, CI and API clients on this host. A token reaches only what its scopes allow.'),
    error,
    h('h3', {}, 'New token'),
    form,
    created,
    h('h3', {}, 'Tokens'),
    h(
      'table',
      {},
      h(
        'thead',
        {},
        h(
          'tr',
          {},
          h('th', {}, 'Name'),
          h('th', {}, 'Scopes'),
          h('th', {}, 'Created'),
          h('th', {}, 'Last use'),
          h('th', {}, h('span', { class: 'muted' }, 'Actions')),
        ),
      ),
      table,
    ),
  );
  render(list.tokens);
}
