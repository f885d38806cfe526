/**
 * The proxy: which member holds it (live from `proxy.holder` events), a
 * button per other reachable member to move it there, on or off, the base
 * domains with their entries, certificates and incidents. Reads go to the
 * member chosen in the picker; a move is asked of the host serving the
 * console, with `peer_id` naming the new holder (its own meaning on
 * POST /proxy/move).
 */
import { coalesce, confirmAction, h, mount, when, type Child } from '../dom';
import { api, memberApi, seg } from '../api';
import { openThenRead } from '../stream';
import { can, type Who } from '../session';
import { createForm } from '../forms';

interface Peer {
  peer_id: string;
  name: string;
  reachable: boolean;
  is_self: boolean;
}

export async function proxyPage(root: Element, who: Who): Promise<() => void> {
  const manage = can(who, 'proxy.manage');
  const error = h('p', { class: 'error', role: 'alert' });
  const live = h('p', { class: 'muted', role: 'status' }, 'Connecting to the event stream…');
  const holderBox = h('section', { class: 'card', 'aria-labelledby': 'holder-h' });
  const rest = h('div');
  const forms = h('div', { class: 'forms' });
  const closers: Array<() => void> = [];
  /** The base domains the entry form offers; the forms are built again only when they change. */
  let formDomains: string | null = null;
  const buildForms = async (domains: string[]) => {
    if (formDomains === domains.join('\n')) return;
    formDomains = domains.join('\n');
    const done = () => soon();
    const made = await Promise.all([
      createForm(who, { operation: 'proxy_domains_create', title: 'New base domain', submit: 'Add domain', done }, (c) => closers.push(c)),
      domains.length
        ? createForm(who, { operation: 'proxy_entries_create', title: 'New entry', submit: 'Add entry', choices: { domain: domains }, done }, (c) =>
            closers.push(c),
          )
        : null,
    ]);
    mount(forms, made);
  };
  let peers: Peer[] = [];
  let holder: string | null = null;
  let lastCfg: { epoch: number; config: { enabled: boolean } } | null = null;
  const nameOf = (id: string | null) => (id ? (peers.find((p) => p.peer_id === id)?.name ?? id) : 'none');
  const attempt = async (fn: () => Promise<unknown>) => {
    error.textContent = '';
    try {
      await fn();
    } catch (err) {
      error.textContent = (err as Error).message;
    }
    soon();
  };

  const showHolder = (cfg: { epoch: number; config: { enabled: boolean } } | null) =>
    mount(
      holderBox,
      h('h3', { id: 'holder-h' }, 'Holder'),
      h(
        'p',
        {},
        'The proxy is held by ',
        h('strong', { 'data-testid': 'proxy-holder' }, nameOf(holder)),
        cfg ? ` (epoch ${cfg.epoch}); ${cfg.config.enabled ? 'enabled' : 'disabled'}` : '',
      ),
      manage && cfg
        ? h(
            'button',
            { type: 'button', onclick: () => void attempt(() => memberApi('PATCH', '/proxy', { enabled: !cfg.config.enabled })) },
            cfg.config.enabled ? 'Disable the proxy' : 'Enable the proxy',
          )
        : null,
      manage
        ? h(
            'ul',
            { class: 'plain' },
            peers
              .filter((p) => p.peer_id !== holder && p.reachable)
              .map((p) =>
                h(
                  'li',
                  {},
                  h(
                    'button',
                    {
                      type: 'button',
                      'aria-label': `Move proxy to ${p.name}`,
                      onclick: async () => {
                        if (!(await confirmAction(`Move the proxy to ${p.name}? It stops serving on ${nameOf(holder)} first.`, 'Move proxy'))) return;
                        // The new holder is shown when its proxy.holder event arrives.
                        await attempt(() => api('POST', '/proxy/move', { peer_id: p.peer_id }));
                      },
                    },
                    `Move proxy to ${p.name}`,
                  ),
                ),
              ),
          )
        : null,
    );

  const section = async (title: string, read: () => Promise<Child>): Promise<Node> => {
    let content: Child;
    try {
      content = await read();
    } catch (err) {
      content = h('p', { class: 'error' }, (err as Error).message);
    }
    return h('section', { 'aria-label': title }, h('h3', {}, title), content);
  };

  const domainsOf = (cfg: any): Child =>
    cfg.config.domains.length
      ? h(
          'table',
          {},
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['Domain', 'Certificate', 'Entries', 'Actions'].map((t) => h('th', {}, t)),
            ),
          ),
          h(
            'tbody',
            {},
            cfg.config.domains.map((d: any) =>
              h(
                'tr',
                {},
                h('td', {}, d.name),
                h('td', {}, d.cert_source),
                h(
                  'td',
                  {},
                  h(
                    'ul',
                    { class: 'plain' },
                    d.entries.map((e: any) =>
                      h(
                        'li',
                        {},
                        h('code', {}, `${e.subdomain}.${d.name}:${e.listen_port ?? 443}`),
                        ' → ',
                        e.target_id ?? `${e.host}:${e.port}`,
                        manage
                          ? h(
                              'button',
                              {
                                type: 'button',
                                class: 'danger',
                                'aria-label': `Delete entry ${e.subdomain}.${d.name}`,
                                onclick: async () => {
                                  if (await confirmAction(`Delete the entry ${e.subdomain}.${d.name}?`, 'Delete'))
                                    await attempt(() =>
                                      memberApi('DELETE', `/proxy/domains/${seg(d.name)}/entries/${seg(e.subdomain)}?listen_port=${e.listen_port ?? 0}`),
                                    );
                                },
                              },
                              'Delete',
                            )
                          : null,
                      ),
                    ),
                  ),
                ),
                h(
                  'td',
                  {},
                  manage
                    ? h(
                        'button',
                        {
                          type: 'button',
                          class: 'danger',
                          'aria-label': `Remove domain ${d.name}`,
                          onclick: async () => {
                            if (await confirmAction(`Remove the base domain ${d.name} and its entries?`, 'Remove'))
                              await attempt(() => memberApi('DELETE', `/proxy/domains/${seg(d.name)}`));
                          },
                        },
                        'Remove',
                      )
                    : null,
                ),
              ),
            ),
          ),
        )
      : h('p', { class: 'muted' }, 'No base domains.');

  const load = async (): Promise<void> => {
    const [cfg, list] = await Promise.all([memberApi('GET', '/proxy/config'), can(who, 'system.read') ? api('GET', '/peers') : null]);
    peers = list?.peers ?? [];
    holder = cfg.holder;
    lastCfg = cfg;
    showHolder(cfg);
    await buildForms(cfg.config.domains.map((d: { name: string }) => d.name));
    mount(
      rest,
      ...(await Promise.all([
        section('Domains and entries', async () => domainsOf(cfg)),
        section('Certificates', async () => {
          const { certs } = await memberApi('GET', '/proxy/certs');
          return certs.length
            ? h(
                'table',
                {},
                h(
                  'thead',
                  {},
                  h(
                    'tr',
                    {},
                    ['Domain', 'Issuer', 'Valid until', 'Problem'].map((t) => h('th', {}, t)),
                  ),
                ),
                h(
                  'tbody',
                  {},
                  certs.map((c: any) =>
                    h('tr', {}, h('td', {}, c.domain), h('td', {}, c.issuer ?? c.issuer_kind), h('td', {}, when(c.not_after)), h('td', {}, c.last_error ?? '')),
                  ),
                ),
              )
            : h('p', { class: 'muted' }, 'No certificates.');
        }),
        section('Incidents', async () => {
          const { incidents } = await memberApi('GET', '/proxy/incidents');
          return incidents.length
            ? h(
                'ul',
                {},
                incidents.map((i: any) => h('li', {}, `${when(i.at)} ${i.kind}: ${i.summary}`)),
              )
            : h('p', { class: 'muted' }, 'No incidents.');
        }),
      ])),
    );
  };
  const soon = coalesce(() => void load().catch((err) => (error.textContent = (err as Error).message)));

  mount(root, h('h2', {}, 'Proxy'), live, error, holderBox, forms, rest);
  const close = await openThenRead(
    'types=proxy.,members.,activity',
    (e) => {
      if (e.type === 'proxy.holder') {
        // Shown from the event at once (with the move buttons it implies); the re-read below fills in the rest.
        holder = (e.data.holder as string | null) ?? null;
        if (lastCfg) lastCfg = { ...lastCfg, epoch: Number(e.data.epoch ?? lastCfg.epoch) };
        showHolder(lastCfg);
      }
      if (e.type.startsWith('proxy.') || e.type.startsWith('members.') || e.resource.startsWith('proxy')) soon();
    },
    live,
    async () => {
      await load();
    },
    "Live: the holder and the proxy's state change as they happen.",
  );
  return () => {
    close();
    for (const c of closers.splice(0)) c();
  };
}
