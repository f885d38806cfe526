/**
 * Signing in: the administrator opens the one-time URL `hostctl console`
 * prints (its secret is in the fragment, exchanged here once for the session
 * cookie); anyone else pastes an API token, kept in the tab's memory only.
 */
import { h, mount } from '../dom';
import { ApiFailure, request, setAuth } from '../api';

/** Exchanges a sign-in link's secret for the session cookie; the URL no longer carries it afterwards. */
export async function redeemLink(secret: string): Promise<void> {
  await request('POST', '/console/session', { link: secret });
  setAuth({ kind: 'admin' });
}

export function signInPage(root: Element, onSignedIn: () => void, message?: string): void {
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', spellcheck: 'false', required: true });
  const error = h('p', { class: 'error', role: 'alert' }, message ?? '');
  const form = h(
    'form',
    {
      onsubmit: async (e: Event) => {
        e.preventDefault();
        const token = input.value.trim();
        if (!token) return;
        setAuth({ kind: 'token', token });
        try {
          await request('GET', '/api/v1/whoami');
          onSignedIn();
        } catch (err) {
          setAuth(null);
          error.textContent =
            err instanceof ApiFailure && err.status === 401
              ? 'This token is not valid on this host (unknown or revoked).'
              : `Sign-in failed: ${(err as Error).message}`;
        }
      },
    },
    h('label', { for: 'token' }, 'API token'),
    input,
    h('button', { type: 'submit', class: 'primary' }, 'Sign in with token'),
  );
  mount(
    root,
    h(
      'main',
      {},
      h('h2', {}, 'Sign in to hostd'),
      error,
      h(
        'div',
        { class: 'card' },
        h('h3', {}, 'Administrator'),
        h('p', {}, 'On the host, run ', h('code', {}, 'hostctl console'), ' and open the link it prints. The link works once, for 10 minutes.'),
      ),
      h(
        'div',
        { class: 'card' },
        h('h3', {}, 'With an API token'),
        h(
          'p',
          { class: 'muted' },
          "You see and do only what the token's scopes allow. The token stays in this tab's memory and is forgotten when the tab closes or reloads.",
        ),
        form,
      ),
    ),
  );
  input.focus();
}
