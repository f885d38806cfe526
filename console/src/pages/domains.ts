/**
 * The resource pages of the domains with a lifecycle: what each lists, its
 * columns and its everyday actions, each with the scope the API asks for.
 * Every call goes to the member chosen in the picker (`peer_id`).
 */
import { h } from '../dom';
import { memberApi, seg } from '../api';
import { resourcePage, stateCell, type ResourceSpec } from './resources';
import type { Who } from '../session';

type Item = Record<string, any>;

const post = (path: string, body?: Record<string, unknown>) => memberApi('POST', path, body);
const del = (path: string) => memberApi('DELETE', path);
const mib = (n: number) => `${n} MiB`;

const vms: ResourceSpec<Item> = {
  title: 'Virtual machines',
  list: async () => (await memberApi('GET', '/vms')).vms,
  key: (v) => String(v.vmid),
  name: (v) => v.name,
  columns: [
    ['Name', (v) => v.name],
    ['ID', (v) => v.vmid],
    ['State', (v) => stateCell(v.state)],
    ['CPU', (v) => v.cpu_cores],
    ['Memory', (v) => mib(v.memory_mb)],
    ['Image', (v) => v.image_id],
  ],
  // VMs report no state event yet: their activity rows and tasks tell the page to re-read.
  events: 'types=vms.,tasks.ended,activity',
  prefix: 'vms/',
  actions: [
    { label: 'Start', scope: 'vm.manage', when: (v) => v.state === 'stopped', run: (v) => post(`/vms/${seg(v.vmid)}/start`) },
    { label: 'Resume', scope: 'vm.manage', when: (v) => v.state === 'suspended' || v.state === 'paused', run: (v) => post(`/vms/${seg(v.vmid)}/resume`) },
    { label: 'Suspend', scope: 'vm.manage', when: (v) => v.state === 'running', run: (v) => post(`/vms/${seg(v.vmid)}/suspend`) },
    { label: 'Stop', scope: 'vm.manage', when: (v) => v.state === 'running' || v.state === 'paused', run: (v) => post(`/vms/${seg(v.vmid)}/stop`) },
    {
      label: 'Delete',
      scope: 'vm.manage',
      when: (v) => v.state !== 'creating',
      confirm: (v) => `Delete VM ${v.vmid} '${v.name}' and its disks? This cannot be undone.`,
      run: (v) => del(`/vms/${seg(v.vmid)}`),
    },
  ],
  create: [{ operation: 'vms_create', title: 'New VM', submit: 'Create VM' }],
  empty: 'No VMs on this member.',
};

const lxc: ResourceSpec<Item> = {
  title: 'LXC containers',
  list: async () => (await memberApi('GET', '/lxc')).containers,
  key: (c) => String(c.lxcid),
  name: (c) => c.name,
  columns: [
    ['Name', (c) => c.name],
    ['ID', (c) => c.lxcid],
    ['State', (c) => stateCell(c.state)],
    ['CPU', (c) => c.cpu_cores],
    ['Memory', (c) => mib(c.memory_mb)],
    ['Image', (c) => c.template],
  ],
  events: 'types=lxc.,tasks.ended,activity',
  prefix: 'lxc/',
  actions: [
    { label: 'Start', scope: 'lxc.manage', when: (c) => c.state === 'stopped', run: (c) => post(`/lxc/${seg(c.lxcid)}/start`) },
    { label: 'Unfreeze', scope: 'lxc.manage', when: (c) => c.state === 'frozen', run: (c) => post(`/lxc/${seg(c.lxcid)}/unfreeze`) },
    { label: 'Freeze', scope: 'lxc.manage', when: (c) => c.state === 'running', run: (c) => post(`/lxc/${seg(c.lxcid)}/freeze`) },
    { label: 'Restart', scope: 'lxc.manage', when: (c) => c.state === 'running', run: (c) => post(`/lxc/${seg(c.lxcid)}/restart`) },
    { label: 'Stop', scope: 'lxc.manage', when: (c) => c.state === 'running' || c.state === 'frozen', run: (c) => post(`/lxc/${seg(c.lxcid)}/stop`) },
    {
      label: 'Delete',
      scope: 'lxc.manage',
      confirm: (c) => `Delete container ${c.lxcid} '${c.name}' and its root filesystem? This cannot be undone.`,
      run: (c) => del(`/lxc/${seg(c.lxcid)}`),
    },
  ],
  create: [{ operation: 'lxc_create', title: 'New container', submit: 'Create container' }],
  empty: 'No containers on this member.',
};

const appAction = (action: string) => (a: Item) => post(`/apps/${seg(a.app_id)}/actions`, { action });
const apps: ResourceSpec<Item> = {
  title: 'Apps',
  list: async () => (await memberApi('GET', '/apps')).apps,
  key: (a) => a.app_id,
  name: (a) => a.name,
  columns: [
    ['Name', (a) => a.name],
    ['Template', (a) => a.template_id],
    ['State', (a) => stateCell(a.state)],
    ['Wanted', (a) => a.desired_state],
    ['Pool', (a) => a.storage_id],
  ],
  events: 'types=apps.,tasks.ended,activity',
  prefix: 'apps/',
  actions: [
    { label: 'Start', scope: 'apps.manage', when: (a) => a.state !== 'running', run: appAction('start') },
    { label: 'Restart', scope: 'apps.manage', when: (a) => a.state === 'running' || a.state === 'partial', run: appAction('restart') },
    { label: 'Stop', scope: 'apps.manage', when: (a) => a.state === 'running' || a.state === 'partial', run: appAction('stop') },
    {
      label: 'Uninstall',
      scope: 'apps.manage',
      confirm: (a) => `Uninstall app '${a.name}'? Its containers are removed.`,
      run: (a) => del(`/apps/${seg(a.app_id)}`),
    },
  ],
  create: [{ operation: 'apps_create', title: 'New app', submit: 'Install app' }],
  empty: 'No apps on this member.',
};

const sandboxes = (who: Who): ResourceSpec<Item> => ({
  title: 'Sandboxes',
  intro: who.administrator ? 'Every sandbox on this member, with the token that owns it.' : 'The sandboxes this token owns (a token sees only its own).',
  list: async () => (await memberApi('GET', '/sandboxes')).sandboxes,
  key: (s) => s.id,
  name: (s) => s.name,
  columns: [
    ['Name', (s) => s.name],
    ['ID', (s) => h('code', {}, s.id)],
    ['State', (s) => stateCell(s.state)],
    ['Image', (s) => s.image_id],
    ['Owner', (s) => s.owner],
  ],
  events: 'types=sandboxes.,tasks.ended,activity',
  prefix: 'sandboxes/',
  actions: [
    { label: 'Resume', scope: 'sandbox.manage', when: (s) => s.state === 'suspended', run: (s) => post(`/sandboxes/${seg(s.id)}/resume`) },
    { label: 'Suspend', scope: 'sandbox.manage', when: (s) => s.state === 'running', run: (s) => post(`/sandboxes/${seg(s.id)}/suspend`) },
    {
      label: 'Destroy',
      scope: 'sandbox.manage',
      when: (s) => s.state !== 'destroyed',
      confirm: (s) => `Destroy sandbox '${s.name}'? Its disk is deleted.`,
      run: (s) => del(`/sandboxes/${seg(s.id)}`),
    },
  ],
  create: [{ operation: 'sandboxes_create', title: 'New sandbox', submit: 'Create sandbox' }],
  empty: 'No sandboxes.',
});

const locations: ResourceSpec<Item> = {
  title: 'Connected locations',
  list: async () => (await memberApi('GET', '/locations')).locations,
  key: (l) => l.location_id,
  name: (l) => l.name,
  columns: [
    ['Name', (l) => l.name],
    ['Share', (l) => h('code', {}, l.remote)],
    ['Status', (l) => stateCell(l.status)],
    ['Last error', (l) => l.last_error ?? ''],
  ],
  events: 'types=locations.,activity',
  prefix: 'locations/',
  actions: [
    { label: 'Reconnect', scope: 'connections.manage', when: (l) => l.status !== 'mounted', run: (l) => post(`/locations/${seg(l.location_id)}/reconnect`) },
    { label: 'Disconnect', scope: 'connections.manage', when: (l) => l.status === 'mounted', run: (l) => post(`/locations/${seg(l.location_id)}/disconnect`) },
    {
      label: 'Remove',
      scope: 'connections.manage',
      confirm: (l) => `Remove location '${l.name}' and its stored credentials?`,
      run: (l) => del(`/locations/${seg(l.location_id)}`),
    },
  ],
  create: [{ operation: 'locations_create', title: 'New location', submit: 'Connect location' }],
  empty: 'No connected locations on this member.',
};

export const vmsPage = (root: Element, who: Who) => resourcePage(root, who, vms);
export const lxcPage = (root: Element, who: Who) => resourcePage(root, who, lxc);
export const appsPage = (root: Element, who: Who) => resourcePage(root, who, apps);
export const sandboxesPage = (root: Element, who: Who) => resourcePage(root, who, sandboxes(who));
export const locationsPage = (root: Element, who: Who) => resourcePage(root, who, locations);
