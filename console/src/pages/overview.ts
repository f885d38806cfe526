/**
 * Overview: every member up or down, this host's health, which member holds
 * the proxy, with a button to move it there (after a confirmation). Each
 * block needs its own read scope and is left out without it; the move
 * button needs proxy.manage.
 */
import { confirmAction, h, mount } from '../dom';
import { api } from '../api';
import { can, type Who } from '../session';

interface Peer {
  peer_id: string;
  name: string;
  address: string | null;
  is_self: boolean;
  reachable: boolean;
  last_seen: string | null;
}

export async function overviewPage(root: Element, who: Who, reload: () => void): Promise<void> {
  const sections: Node[] = [h('h2', {}, 'Overview')];
  const error = h('p', { class: 'error', role: 'alert' });
  sections.push(error);
  const [peers, health, proxy] = await Promise.all([
    can(who, 'system.read') ? api('GET', '/peers') : null,
    can(who, 'system.read') ? api('GET', '/system/health') : null,
    can(who, 'proxy.read') ? api('GET', '/proxy/host-status') : null,
  ]);
  if (health) {
    sections.push(
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'health-h' },
        h('h3', { id: 'health-h' }, `Health of ${health.node.name}`),
        h(
          'p',
          {},
          'Status: ',
          h('strong', { class: health.status, 'data-testid': 'health-status' }, health.status),
          health.reasons.length ? ` (${health.reasons.join('; ')})` : '',
        ),
        h(
          'p',
          {},
          `CPU ${health.cpu.usage_percent.toFixed(0)}% of ${health.cpu.cores} cores, memory ${health.memory.used_percent.toFixed(0)}% used, load ${health.cpu.load.map((l: number) => l.toFixed(2)).join(' ')}`,
        ),
      ),
    );
  }
  const holder: string | null = proxy?.holder ?? null;
  if (peers) {
    const rows = (peers.peers as Peer[]).map((p) =>
      h(
        'tr',
        {},
        h('td', {}, p.name, p.is_self ? h('span', { class: 'muted' }, ' (this host)') : ''),
        h('td', {}, h('code', {}, p.peer_id)),
        h('td', {}, p.address ?? '—'),
        h('td', {}, h('span', { class: p.reachable ? 'up' : 'down' }, p.reachable ? 'up' : 'down')),
        h('td', {}, proxy ? (p.peer_id === holder ? h('strong', {}, 'holds the proxy') : '') : ''),
        h(
          'td',
          {},
          proxy && can(who, 'proxy.manage') && p.peer_id !== holder && p.reachable
            ? h(
                'button',
                {
                  type: 'button',
                  'aria-label': `Move proxy to ${p.name}`,
                  onclick: async () => {
                    if (!(await confirmAction(`Move the proxy to ${p.name}? It stops serving on ${holder ?? 'the current holder'} first.`, 'Move proxy')))
                      return;
                    try {
                      await api('POST', '/proxy/move', { peer_id: p.peer_id });
                      reload();
                    } catch (err) {
                      error.textContent = (err as Error).message;
                    }
                  },
                },
                'Move proxy here',
              )
            : '',
        ),
      ),
    );
    sections.push(
      h(
        'section',
        { 'aria-labelledby': 'members-h' },
        h('h3', { id: 'members-h' }, 'Members'),
        h(
          'table',
          {},
          h(
            'thead',
            {},
            h(
              'tr',
              {},
              ['Name', 'Id', 'Address', 'State', 'Proxy', 'Actions'].map((t) => h('th', {}, t)),
            ),
          ),
          h('tbody', {}, rows),
        ),
      ),
    );
  }
  if (proxy) {
    sections.push(
      h(
        'section',
        { class: 'card', 'aria-labelledby': 'proxy-h' },
        h('h3', { id: 'proxy-h' }, 'Proxy'),
        h(
          'p',
          {},
          'Holder: ',
          h('strong', { 'data-testid': 'proxy-holder' }, holder ?? 'none'),
          ` (epoch ${proxy.epoch}); Caddy ${proxy.caddy_running ? 'running' : 'not running'} here`,
        ),
      ),
    );
  }
  if (!peers && !health && !proxy) sections.push(h('p', { class: 'muted' }, 'This token can read none of the overview (it needs system.read or proxy.read).'));
  mount(root, sections);
}
