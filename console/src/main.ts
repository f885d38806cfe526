/**
 * The console: sign-in, then one page at a time inside a header with the
 * navigation. Pages appear only when the caller's scopes allow them; the
 * API checks every call again whatever the page shows.
 */
import { h, mount } from './dom';
import { ApiFailure, api, currentAuth, request, setAuth } from './api';
import { redeemLink, signInPage } from './pages/signin';
import { overviewPage } from './pages/overview';
import { tokensPage } from './pages/tokens';
import { activityPage } from './pages/activity';
import { can } from './session';
import type { Who } from './session';

type PageId = 'overview' | 'activity' | 'tokens';
interface Page { id: PageId; title: string; show: (who: Who) => boolean; render: (root: Element, who: Who, reload: () => void) => Promise<void | (() => void)> }

const PAGES: Page[] = [
  { id: 'overview', title: 'Overview', show: () => true, render: overviewPage },
  { id: 'activity', title: 'Activity', show: (w) => can(w, 'system.read'), render: (root) => activityPage(root) },
  { id: 'tokens', title: 'Access tokens', show: (w) => w.administrator, render: (root) => tokensPage(root) },
];

const app = document.getElementById('app')!;
let current: PageId = 'overview';
/** Closes what the page on screen keeps open (its event stream). */
let leave: (() => void) | undefined;

async function signOut(): Promise<void> {
  leave?.();
  leave = undefined;
  if (currentAuth()?.kind === 'admin') await request('DELETE', '/console/session').catch(() => undefined);
  setAuth(null);
  signInPage(app, () => void start());
}

async function show(who: Who, id: PageId): Promise<void> {
  leave?.();
  leave = undefined;
  current = id;
  const pages = PAGES.filter((p) => p.show(who));
  const page = pages.find((p) => p.id === id) ?? pages[0];
  const main = h('main', { id: 'main', tabindex: -1 }, h('p', {}, 'Loading…'));
  mount(app,
    h('header', {},
      h('h1', {}, 'hostd'),
      h('nav', { 'aria-label': 'Pages' }, h('ul', {}, pages.map((p) => h('li', {}, h('button', {
        type: 'button', 'aria-current': p.id === page.id ? 'page' : false, onclick: () => void show(who, p.id),
      }, p.title))))),
      h('div', { class: 'who' },
        h('span', {}, who.administrator ? 'Administrator' : `Token ${who.name}`),
        h('button', { type: 'button', onclick: () => void signOut() }, 'Sign out'))),
    main);
  try {
    leave = (await page.render(main, who, () => void show(who, page.id))) ?? undefined;
  } catch (err) {
    if (err instanceof ApiFailure && err.status === 401) return signInPage(app, () => void start(), 'Your session ended; sign in again.');
    mount(main, h('h2', {}, page.title), h('p', { class: 'error', role: 'alert' }, (err as Error).message));
  }
}

async function start(): Promise<void> {
  const who = (await api('GET', '/whoami')) as Who;
  await show(who, current);
}

async function boot(): Promise<void> {
  const m = /^#sign-in=([A-Za-z0-9_-]{1,200})$/.exec(location.hash);
  if (m) {
    // The link is spent by this one exchange; take it out of the address bar and history first.
    history.replaceState(null, '', location.pathname);
    try {
      await redeemLink(m[1]);
    } catch (err) {
      return signInPage(app, () => void start(), (err as Error).message);
    }
    return start();
  }
  try {
    await request('GET', '/console/session');
    setAuth({ kind: 'admin' });
    return start();
  } catch {
    return signInPage(app, () => void start());
  }
}

void boot();
