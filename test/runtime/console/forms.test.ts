/**
 * The console's create forms in Chromium, on one daemon (no runtime needed
 * beyond the proxy's configuration): a base domain and an entry made through
 * the forms the catalog describes, the server's 400 shown next to a form in
 * the API's words, and a form offered only to a caller holding its
 * operation's scopes. Also the Folders page kept live for a token that reads
 * folders and nothing else (folder changes reach it as `folders.state`
 * events, not as activity rows it cannot read).
 */
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { API } from '../../helpers/conformance.js';
import { ConsolePages, browserMissing, launchBrowser, openForm, openPage, screenshot } from '../../helpers/browser.js';
import { requireOrSkip } from '../../helpers/runtime-gate.js';

describe('console create forms in Chromium', function () {
  this.timeout(180_000);
  let d: TestDaemon;
  let pages: ConsolePages | undefined;
  const tag = `f${process.pid}`;

  before(async function () {
    requireOrSkip(this, 'console', browserMissing() ?? null);
    // The entry made below points at a port of this host (nothing is sent to it: no request goes through the proxy).
    d = await startDaemon({ configYaml: 'proxy:\n  allow_loopback_upstreams: true\n' });
    pages = new ConsolePages(await launchBrowser());
  });

  after(async () => {
    await pages?.close();
    // The domains this file made (an entry goes with its domain).
    const cfg = await d?.admin.request('GET', `${API}/proxy/config`);
    for (const dom of cfg?.body?.config?.domains ?? [])
      if (String(dom.name).startsWith(tag)) await d.admin.request('DELETE', `${API}/proxy/domains/${encodeURIComponent(dom.name)}`);
  });

  const admin = (): Promise<Page> => pages!.adminOf(d.dataDir);
  const domains = async (): Promise<any[]> => (await d.admin.request('GET', `${API}/proxy/config`)).body.config.domains;

  it('Proxy: a base domain, then an entry of it, made with the forms; each form holds exactly the arguments the catalog lists', async () => {
    const page = await admin();
    await openPage(page, 'Proxy', 'Proxy');
    const domain = `${tag}.example.test`;

    const form = await openForm(page, 'New base domain');
    await form.getByLabel('name', { exact: true }).fill(domain);
    await form.getByLabel('cert_source', { exact: true }).fill('internal');
    await form.getByRole('button', { name: 'Add domain' }).click();
    await page.getByRole('region', { name: 'Domains and entries' }).getByRole('cell', { name: domain, exact: true }).waitFor({ timeout: 30_000 });
    expect((await domains()).map((x) => x.name)).to.include(domain);

    // The entry form names the domain from the page's list, and every other argument from the catalog.
    const entry = await openForm(page, 'New entry');
    const catalog = (await d.admin.request('GET', `${API}/catalog`)).body.endpoints.find((e: any) => e.operation === 'proxy_entries_create');
    const labels = await entry.locator('label').allTextContents();
    expect([...labels].sort()).to.deep.equal(
      Object.keys(catalog.arguments.properties)
        .filter((n) => n !== 'peer_id')
        .sort(),
    );
    await entry.getByLabel('domain', { exact: true }).selectOption(domain);
    await entry.getByLabel('subdomain', { exact: true }).fill('web');
    await entry.getByLabel('port', { exact: true }).fill('8080');
    await entry.getByLabel('host', { exact: true }).fill('127.0.0.1');
    await entry.getByRole('button', { name: 'Add entry' }).click();
    const refusal = entry.getByRole('alert').filter({ hasText: /./ });
    await page.getByText(`web.${domain}:443`).or(refusal).first().waitFor({ timeout: 30_000 });
    expect(await refusal.count(), (await refusal.allTextContents()).join()).to.equal(0);
    const made = (await domains()).find((x) => x.name === domain);
    expect(made.entries.map((e: any) => [e.subdomain, e.host, e.port])).to.deep.equal([['web', '127.0.0.1', 8080]]);
    await screenshot(page, 'proxy-forms');

    const rows = (await d.admin.request('GET', `${API}/activity?limit=50`)).body.events;
    const ops = rows.filter((r: any) => r.metadata.client === 'console').map((r: any) => r.metadata.operation);
    expect(ops).to.include.members(['proxy_domains_create', 'proxy_entries_create']);
  });

  it("a create the server refuses shows its 400 next to the form, in the API's words, and makes nothing", async () => {
    const page = await admin();
    await openPage(page, 'Proxy', 'Proxy');
    const bad = { name: 'not a domain', cert_source: 'internal' };
    const refused = await d.admin.request('POST', `${API}/proxy/domains`, bad);
    expect(refused.status).to.equal(400);
    const before = (await domains()).length;

    const form = await openForm(page, 'New base domain');
    await form.getByLabel('name', { exact: true }).fill(bad.name);
    await form.getByLabel('cert_source', { exact: true }).fill(bad.cert_source);
    await form.getByRole('button', { name: 'Add domain' }).click();
    const alert = form.getByRole('alert').filter({ hasText: /./ });
    await alert.waitFor();
    expect(await alert.textContent()).to.equal(refused.body.error);
    expect(await form.getByLabel('name', { exact: true }).inputValue(), 'the values stay to be corrected').to.equal(bad.name);
    expect((await domains()).length).to.equal(before);
    await screenshot(page, 'form-refused');
  });

  it('a form is offered only with every scope its operation needs', async () => {
    const reader = await d.token(`${tag}-reader`, ['files.read', 'vm.read', 'lxc.read', 'apps.read', 'proxy.read', 'connections.read', 'sandbox.read']);
    const page = await pages!.withToken(d.url, reader);
    for (const [nav, heading] of [
      ['VMs', 'Virtual machines'],
      ['LXC', 'LXC containers'],
      ['Apps', 'Apps'],
      ['Sandboxes', 'Sandboxes'],
      ['Locations', 'Connected locations'],
      ['Proxy', 'Proxy'],
    ]) {
      await openPage(page, nav, heading);
      expect(await page.getByRole('main').locator('summary, form').count(), heading).to.equal(0);
    }

    // proxy.manage offers the proxy's forms, and no other domain's.
    const proxyManager = await d.token(`${tag}-proxy`, ['proxy.read', 'proxy.manage', 'lxc.read']);
    const p2 = await pages!.withToken(d.url, proxyManager);
    await openPage(p2, 'Proxy', 'Proxy');
    await p2.locator('summary', { hasText: 'New base domain' }).waitFor();
    await openPage(p2, 'LXC', 'LXC containers');
    expect(await p2.getByRole('main').locator('summary, form').count()).to.equal(0);
    // The API refuses what the form would have done without the scope.
    expect((await d.request('POST', `${API}/lxc`, { token: proxyManager, body: { name: 'no', template: 'bb' } })).status).to.equal(403);
  });

  it('Folders stay live for a token that reads folders and nothing else: made, changed inside, renamed and deleted elsewhere', async () => {
    const reader = await d.token(`${tag}-files`, ['files.read']);
    const writer = await d.token(`${tag}-writer`, ['files.manage']);
    const call = async (method: string, p: string, body?: unknown) => {
      const r = await d.request(method, `${API}${p}`, { token: writer, body });
      expect(r.status, r.text).to.be.within(200, 299);
      return r.body;
    };
    const page = await pages!.withToken(d.url, reader);
    await openPage(page, 'Folders', 'Folders');
    const row = (name: string) => page.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) });
    const name = `${tag}-live`;

    const { folder } = await call('POST', '/folders', { storage_id: 'default', name });
    await row(name).waitFor({ timeout: 30_000 });
    await page.getByRole('button', { name: `Open ${name}` }).click();
    await page.getByRole('heading', { name: `Contents of ${name}` }).waitFor();

    await call('POST', `/folders/${folder.folder_id}/subfolders`, { name: 'inside', sub_path: '' });
    await page.getByRole('button', { name: 'Open inside' }).waitFor({ timeout: 30_000 });

    await call('PATCH', `/folders/${folder.folder_id}`, { new_name: `${name}-r` });
    await row(`${name}-r`).waitFor({ timeout: 30_000 });
    await page.getByRole('heading', { name: `Contents of ${name}-r` }).waitFor({ timeout: 30_000 });

    await call('DELETE', `/folders/${folder.folder_id}`);
    await row(`${name}-r`).waitFor({ state: 'detached', timeout: 30_000 });
    await page.getByRole('heading', { name: /^Contents of / }).waitFor({ state: 'detached', timeout: 30_000 });
    await screenshot(page, 'folders-live-files-read');
  });
});
