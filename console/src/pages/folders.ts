/**
 * Folders: the managed folders of the chosen member (create, rename, delete
 * after a confirmation) and a browser of one folder's contents (open a
 * subfolder, make one, copy or delete an entry). Live from `folders.state`
 * events (read with files.read): the list on any folder's change, the open
 * contents on their folder's.
 */
import { askValue, coalesce, confirmAction, h, mount, when } from '../dom';
import { memberApi, seg } from '../api';
import { can, type Who } from '../session';
import { resourcePage } from './resources';

type Folder = { folder_id: string; name: string; storage_id: string; path: string; created_at: string };
type Entry = { name: string; path: string; type: string; size: number | null; modified: string };

export async function foldersPage(root: Element, who: Who): Promise<() => void> {
  const manage = can(who, 'files.manage');
  const browser = h('section', { 'aria-label': 'Folder contents' });

  /** The folder and subfolder the contents view shows (re-read when that folder's events arrive). */
  let shown: { f: Folder; sub: string } | null = null;
  const soon = coalesce(() => void (shown && browse(shown.f, shown.sub)));

  const browse = async (f: Folder, sub: string): Promise<void> => {
    shown = { f, sub };
    const error = h('p', { class: 'error', role: 'alert' });
    const again = () => browse(f, sub);
    let out: { entries: Entry[]; truncated: boolean };
    try {
      out = await memberApi('GET', `/folders/${seg(f.folder_id)}/contents?sub_path=${encodeURIComponent(sub)}`);
    } catch (err) {
      mount(browser, h('h3', {}, `${f.name}/${sub}`), h('p', { class: 'error', role: 'alert' }, (err as Error).message));
      return;
    }
    const attempt = async (fn: () => Promise<unknown>) => {
      try {
        await fn();
        await again();
      } catch (err) {
        error.textContent = (err as Error).message;
      }
    };
    const up = sub.includes('/') ? sub.slice(0, sub.lastIndexOf('/')) : '';
    const sname = h('input', { id: 'subfolder-name', type: 'text', autocomplete: 'off', required: true });
    mount(
      browser,
      h('h3', {}, `Contents of ${f.name}${sub ? `/${sub}` : ''}`),
      error,
      sub ? h('button', { type: 'button', onclick: () => void browse(f, up) }, 'Up one level') : null,
      manage
        ? h(
            'form',
            {
              class: 'inline',
              onsubmit: (e: Event) => {
                e.preventDefault();
                void attempt(() => memberApi('POST', `/folders/${seg(f.folder_id)}/subfolders`, { name: sname.value, sub_path: sub }));
              },
            },
            h('label', { for: 'subfolder-name' }, 'New subfolder'),
            sname,
            h('button', { type: 'submit' }, 'Create subfolder'),
          )
        : null,
      h(
        'table',
        {},
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ['Name', 'Type', 'Size', 'Modified', 'Actions'].map((t) => h('th', {}, t)),
          ),
        ),
        h(
          'tbody',
          {},
          out.entries.length
            ? out.entries.map((e) =>
                h(
                  'tr',
                  {},
                  h('td', {}, e.name),
                  h('td', {}, e.type),
                  h('td', {}, e.size ?? ''),
                  h('td', {}, when(e.modified)),
                  h(
                    'td',
                    { class: 'row-actions' },
                    e.type === 'folder' ? h('button', { type: 'button', 'aria-label': `Open ${e.name}`, onclick: () => void browse(f, e.path) }, 'Open') : null,
                    manage
                      ? h(
                          'button',
                          {
                            type: 'button',
                            'aria-label': `Copy ${e.name}`,
                            onclick: async () => {
                              const dst = await askValue(`Copy '${e.path}' to which path in ${f.name}?`, 'Destination path', `${e.path}-copy`, 'Copy');
                              if (dst)
                                await attempt(() => memberApi('POST', `/folders/${seg(f.folder_id)}/entries/${seg(e.path)}/copy`, { dst_sub_path: dst }));
                            },
                          },
                          'Copy',
                        )
                      : null,
                    manage
                      ? h(
                          'button',
                          {
                            type: 'button',
                            class: 'danger',
                            'aria-label': `Delete ${e.name}`,
                            onclick: async () => {
                              if (await confirmAction(`Delete '${e.path}' from ${f.name}${e.type === 'folder' ? ' with everything in it' : ''}?`, 'Delete'))
                                await attempt(() => memberApi('DELETE', `/folders/${seg(f.folder_id)}/entries/${seg(e.path)}`));
                            },
                          },
                          'Delete',
                        )
                      : null,
                  ),
                ),
              )
            : h('tr', {}, h('td', { colspan: 5, class: 'muted' }, 'Empty.')),
        ),
      ),
      out.truncated ? h('p', { class: 'muted' }, "The listing stopped at the daemon's limit.") : null,
    );
  };

  return resourcePage<Folder>(root, who, {
    title: 'Folders',
    list: async () => (await memberApi('GET', '/folders')).folders,
    key: (f) => f.folder_id,
    name: (f) => f.name,
    columns: [
      ['Name', (f) => f.name],
      ['Pool', (f) => f.storage_id],
      ['Path', (f) => h('code', {}, f.path)],
      ['Created', (f) => when(f.created_at)],
    ],
    // folders.* reaches files.read; activity rows (system.read) also name the folder operations.
    events: 'types=folders.,activity,tasks.ended',
    prefix: 'folders/',
    actions: [
      { label: 'Open', scope: 'files.read', run: (f) => browse(f, '') },
      {
        label: 'Rename',
        scope: 'files.manage',
        run: async (f) => {
          const name = await askValue(`Rename folder '${f.name}' to:`, 'New name', f.name, 'Rename');
          if (name !== null && name !== f.name) await memberApi('PATCH', `/folders/${seg(f.folder_id)}`, { new_name: name });
        },
      },
      {
        label: 'Delete',
        scope: 'files.manage',
        confirm: (f) => `Delete folder '${f.name}' and everything in it?`,
        run: (f) => memberApi('DELETE', `/folders/${seg(f.folder_id)}`),
      },
    ],
    empty: 'No folders on this member.',
    extra: (w, refresh, report) => {
      if (!can(w, 'files.manage')) return null;
      const name = h('input', { id: 'folder-name', type: 'text', autocomplete: 'off', required: true });
      const pool = h('input', { id: 'folder-pool', type: 'text', autocomplete: 'off', required: true, value: 'default' });
      return h(
        'form',
        {
          onsubmit: async (e: Event) => {
            e.preventDefault();
            try {
              await memberApi('POST', '/folders', { name: name.value, storage_id: pool.value });
              name.value = '';
            } catch (err) {
              report(err);
            }
            await refresh();
          },
        },
        h('h3', {}, 'New folder'),
        h('div', {}, h('label', { for: 'folder-name' }, 'Folder name'), name),
        h('div', {}, h('label', { for: 'folder-pool' }, 'Pool'), pool),
        h('div', {}, h('button', { type: 'submit', class: 'primary' }, 'Create folder')),
      );
    },
    also: (e) => {
      // The open folder's own events: its contents changed (re-read where the page stands), it was renamed or deleted.
      if (!shown || e.type !== 'folders.state' || e.resource !== `folders/${shown.f.folder_id}`) return;
      if (e.data.state === 'deleted') {
        shown = null;
        mount(browser);
      } else {
        if (typeof e.data.name === 'string') shown.f = { ...shown.f, name: e.data.name };
        soon();
      }
    },
    after: browser,
  });
}
