/**
 * The console: sign-in, then one page at a time inside a header with the
 * navigation. Pages appear only when the caller's scopes allow them; the
 * API checks every call again whatever the page shows.
 */
import { h, mount } from './dom';
import { ApiFailure, api, currentAuth, currentMember, request, setAuth, setMember } from './api';
import { redeemLink, signInPage } from './pages/signin';
import { overviewPage } from './pages/overview';
import { tokensPage } from './pages/tokens';
import { activityPage } from './pages/activity';
import { appsPage, locationsPage, lxcPage, sandboxesPage, vmsPage } from './pages/domains';
import { foldersPage } from './pages/folders';
import { proxyPage } from './pages/proxy';
import { forgetTasks, tasksPage } from './pages/tasks';
import { can } from './session';
import type { Who } from './session';

type PageId = 'overview' | 'vms' | 'lxc' | 'apps' | 'sandboxes' | 'folders' | 'locations' | 'proxy' | 'tasks' | 'activity' | 'tokens';
interface Page {
  id: PageId;
  title: string;
  show: (who: Who) => boolean;
  /** Whether the page shows the member chosen in the picker (else always this host). */
  onMember: boolean;
  render: (root: Element, who: Who, reload: () => void) => Promise<void | (() => void)>;
}

const PAGES: Page[] = [
  { id: 'overview', title: 'Overview', show: () => true, onMember: false, render: overviewPage },
  { id: 'vms', title: 'VMs', show: (w) => can(w, 'vm.read'), onMember: true, render: vmsPage },
  { id: 'lxc', title: 'LXC', show: (w) => can(w, 'lxc.read'), onMember: true, render: lxcPage },
  { id: 'apps', title: 'Apps', show: (w) => can(w, 'apps.read'), onMember: true, render: appsPage },
  { id: 'sandboxes', title: 'Sandboxes', show: (w) => can(w, 'sandbox.read'), onMember: true, render: sandboxesPage },
  { id: 'folders', title: 'Folders', show: (w) => can(w, 'files.read'), onMember: true, render: foldersPage },
  { id: 'locations', title: 'Locations', show: (w) => can(w, 'connections.read'), onMember: true, render: locationsPage },
  { id: 'proxy', title: 'Proxy', show: (w) => can(w, 'proxy.read'), onMember: true, render: proxyPage },
  { id: 'tasks', title: 'Tasks', show: (w) => can(w, 'vm.read'), onMember: true, render: (root) => tasksPage(root) },
  { id: 'activity', title: 'Activity', show: (w) => can(w, 'system.read'), onMember: true, render: (root) => activityPage(root) },
  { id: 'tokens', title: 'Access tokens', show: (w) => w.administrator, onMember: false, render: (root) => tokensPage(root) },
];

interface Member {
  peer_id: string;
  name: string;
  is_self: boolean;
  reachable: boolean;
}
/** The cluster's members for the picker (GET /peers, with system.read); empty: no picker. */
let members: Member[] = [];

const app = document.getElementById('app')!;
let current: PageId = 'overview';
/** Closes what the page on screen keeps open (its event stream). */
let leave: (() => void) | undefined;
/** Counts page changes: a page that finishes loading after the user moved on closes its stream at once. */
let shown = 0;

async function signOut(): Promise<void> {
  leave?.();
  leave = undefined;
  if (currentAuth()?.kind === 'admin') await request('DELETE', '/console/session').catch(() => undefined);
  setAuth(null);
  members = [];
  signInPage(app, () => void start());
}

async function show(who: Who, id: PageId): Promise<void> {
  leave?.();
  leave = undefined;
  current = id;
  const pages = PAGES.filter((p) => p.show(who));
  const page = pages.find((p) => p.id === id) ?? pages[0];
  const main = h('main', { id: 'main', tabindex: -1 }, h('p', {}, 'Loading…'));
  const picker =
    members.length > 1
      ? h(
          'select',
          {
            id: 'member',
            onchange: (e: Event) => {
              const id = (e.target as HTMLSelectElement).value;
              setMember(members.find((m) => m.peer_id === id)?.is_self ? null : id);
              void show(who, page.id);
            },
          },
          members.map((m) =>
            h(
              'option',
              { value: m.peer_id, selected: (currentMember() ?? members.find((x) => x.is_self)?.peer_id) === m.peer_id },
              `${m.name}${m.is_self ? ' (this host)' : ''}${m.reachable ? '' : ' (down)'}`,
            ),
          ),
        )
      : null;
  mount(
    app,
    h(
      'header',
      {},
      h('h1', {}, 'hostd'),
      picker ? h('div', { class: 'member' }, h('label', { for: 'member' }, 'Member'), picker) : null,
      h(
        'nav',
        { 'aria-label': 'Pages' },
        h(
          'ul',
          {},
          pages.map((p) =>
            h(
              'li',
              {},
              h(
                'button',
                {
                  type: 'button',
                  'aria-current': p.id === page.id ? 'page' : false,
                  onclick: () => void show(who, p.id),
                },
                p.title,
              ),
            ),
          ),
        ),
      ),
      h(
        'div',
        { class: 'who' },
        h('span', {}, who.administrator ? 'Administrator' : `Token ${who.name}`),
        h('button', { type: 'button', onclick: () => void signOut() }, 'Sign out'),
      ),
    ),
    main,
  );
  const generation = ++shown;
  try {
    const close = (await page.render(main, who, () => void show(who, page.id))) ?? undefined;
    if (generation !== shown) return close?.();
    leave = close;
  } catch (err) {
    if (generation !== shown) return;
    if (err instanceof ApiFailure && err.status === 401) return signInPage(app, () => void start(), 'Your session ended; sign in again.');
    mount(main, h('h2', {}, page.title), h('p', { class: 'error', role: 'alert' }, (err as Error).message));
  }
  if (page.onMember && currentMember()) {
    const m = members.find((x) => x.peer_id === currentMember());
    main.prepend(h('p', { class: 'on-member' }, `Showing member ${m?.name ?? currentMember()}`));
  }
}

async function start(): Promise<void> {
  // A new sign-in may be another caller: the tasks the last one saw are not shown to it.
  forgetTasks();
  const who = (await api('GET', '/whoami')) as Who;
  members = can(who, 'system.read') ? ((await api('GET', '/peers').catch(() => ({ peers: [] }))).peers as Member[]) : [];
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
