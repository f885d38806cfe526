/**
 * The console's domain pages in Chromium, on one daemon: the Folders page
 * managing folders (create, browse, subfolder, copy, delete an entry, rename,
 * delete with a confirmation) through the API, a change made elsewhere
 * appearing without a reload, an API refusal shown in the API's own words,
 * and a token that can only read seeing the pages its scopes allow and no
 * control it cannot use.
 */
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { API, raw } from '../../helpers/conformance.js';
import { ConsolePages, browserMissing, launchBrowser, openPage, screenshot } from '../../helpers/browser.js';
import { requireOrSkip } from '../../helpers/runtime-gate.js';

describe('console domain pages in Chromium', function () {
  this.timeout(180_000);
  let d: TestDaemon;
  let pages: ConsolePages | undefined;

  before(async function () {
    requireOrSkip(this, 'console', browserMissing() ?? null);
    d = await startDaemon();
    pages = new ConsolePages(await launchBrowser());
  });

  after(async () => {
    await pages?.close();
  });

  const admin = (): Promise<Page> => pages!.adminOf(d.dataDir);
  const folderNames = async (): Promise<string[]> => (await d.admin.request('GET', `${API}/folders`)).body.folders.map((f: any) => f.name);
  const row = (page: Page, name: string) => page.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) });

  it('Folders: create, browse, make a subfolder, copy and delete an entry, rename, delete after a confirmation; every change an API call', async () => {
    const page = await admin();
    await openPage(page, 'Folders', 'Folders');
    const name = `con-${process.pid}`;
    await page.getByLabel('Folder name').fill(name);
    await page.getByRole('button', { name: 'Create folder' }).click();
    await row(page, name).waitFor();
    expect(await folderNames()).to.include(name);

    await page.getByRole('button', { name: `Open ${name}` }).click();
    await page.getByRole('heading', { name: `Contents of ${name}` }).waitFor();
    await page.getByLabel('New subfolder').fill('docs');
    await page.getByRole('button', { name: 'Create subfolder' }).click();
    await page.getByRole('button', { name: 'Open docs' }).waitFor();
    await page.getByRole('button', { name: 'Copy docs' }).click();
    await page.getByRole('dialog').getByLabel('Destination path').fill('docs-2');
    await page.getByRole('dialog').getByRole('button', { name: 'Copy' }).click();
    await page.getByRole('button', { name: 'Open docs-2' }).waitFor();
    await page.getByRole('button', { name: 'Delete docs-2' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await page.getByRole('button', { name: 'Open docs-2' }).waitFor({ state: 'detached' });
    const folder = (await d.admin.request('GET', `${API}/folders`)).body.folders.find((f: any) => f.name === name);
    const contents = await d.admin.request('GET', `${API}/folders/${folder.folder_id}/contents`);
    expect(contents.body.entries.map((e: any) => e.name)).to.deep.equal(['docs']);
    await screenshot(page, 'folders');

    await page.getByRole('button', { name: `Rename ${name}` }).click();
    await page.getByRole('dialog').getByLabel('New name').fill(`${name}-r`);
    await page.getByRole('dialog').getByRole('button', { name: 'Rename' }).click();
    await row(page, `${name}-r`).waitFor();
    expect(await folderNames())
      .to.include(`${name}-r`)
      .and.not.include(name);

    // Delete asks first: Cancel keeps the folder, Delete removes it.
    await page.getByRole('button', { name: `Delete ${name}-r` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    expect(await folderNames()).to.include(`${name}-r`);
    await page.getByRole('button', { name: `Delete ${name}-r` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await row(page, `${name}-r`).waitFor({ state: 'detached' });
    expect(await folderNames()).not.to.include(`${name}-r`);

    // Each change was a call through dispatch: an activity row marked as the console's.
    const rows = (await d.admin.request('GET', `${API}/activity?limit=50`)).body.events;
    const ops = rows.filter((r: any) => r.metadata.client === 'console').map((r: any) => r.metadata.operation);
    for (const op of ['folders_create', 'folders_subfolders_create', 'folders_entries_copy', 'folders_entries_delete', 'folders_update', 'folders_delete'])
      expect(ops, op).to.include(op);
  });

  it("Folders: a folder made elsewhere appears without a reload; a refused call shows the API's own words", async () => {
    const page = await admin();
    await openPage(page, 'Folders', 'Folders');
    const made = `elsewhere-${process.pid}`;
    const token = await d.token('pages-elsewhere', ['files.manage']);
    expect((await d.request('POST', `${API}/folders`, { token, body: { storage_id: 'default', name: made } })).status).to.equal(201);
    await row(page, made).waitFor({ timeout: 30_000 });

    const refused = await raw(d.url, 'POST', `${API}/folders`, {
      token,
      body: JSON.stringify({ storage_id: 'no-such-pool', name: 'x' }),
      headers: { 'content-type': 'application/json' },
    });
    expect(refused.status).to.be.within(400, 499);
    await page.getByLabel('Pool').fill('no-such-pool');
    await page.getByLabel('Folder name').fill('x');
    await page.getByRole('button', { name: 'Create folder' }).click();
    await page.getByRole('alert').filter({ hasText: refused.body.error }).waitFor();
    expect(await page.getByRole('alert').filter({ hasText: refused.body.error }).textContent()).to.equal(refused.body.error);
  });

  it('a token sees only the pages its scopes allow, and on them no control it cannot use', async () => {
    const token = await d.token('pages-reader', ['files.read', 'vm.read', 'lxc.read', 'apps.read', 'proxy.read', 'connections.read']);
    expect((await d.admin.request('POST', `${API}/folders`, { storage_id: 'default', name: `seen-${process.pid}` })).status).to.equal(201);
    const page = await pages!.withToken(d.url, token);
    const nav = page.getByRole('navigation', { name: 'Pages' }).getByRole('button');
    expect(await nav.allTextContents()).to.deep.equal(['Overview', 'VMs', 'LXC', 'Apps', 'Folders', 'Locations', 'Proxy', 'Tasks']);

    await openPage(page, 'Folders', 'Folders');
    await row(page, `seen-${process.pid}`).waitFor();
    expect(await page.getByLabel('Folder name').count()).to.equal(0);
    expect(await page.getByRole('button', { name: /^(Rename|Delete|Create)/ }).count()).to.equal(0);
    await page.getByRole('button', { name: `Open seen-${process.pid}` }).click();
    await page.getByRole('heading', { name: `Contents of seen-${process.pid}` }).waitFor();
    expect(await page.getByLabel('New subfolder').count()).to.equal(0);
    await screenshot(page, 'folders-read-only');

    for (const [nav2, heading] of [
      ['VMs', 'Virtual machines'],
      ['LXC', 'LXC containers'],
      ['Apps', 'Apps'],
      ['Locations', 'Connected locations'],
      ['Proxy', 'Proxy'],
      ['Tasks', 'Tasks'],
    ]) {
      await openPage(page, nav2, heading);
      // The only buttons are the navigation, Sign out and reading ones (Follow a task): no manage control is rendered.
      const names = (await page
        .getByRole('main')
        .getByRole('button')
        .evaluateAll((bs) => bs.map((b) => b.getAttribute('aria-label') ?? b.textContent ?? ''))) as string[];
      expect(
        names.filter((n) => !/^(Follow|Open) /.test(n)),
        heading,
      ).to.deep.equal([]);
      await screenshot(page, `read-only-${nav2.toLowerCase()}`);
    }
    // And the API refuses what the hidden controls would have done.
    const refused = await raw(d.url, 'POST', `${API}/folders`, {
      token,
      body: JSON.stringify({ storage_id: 'default', name: 'no' }),
      headers: { 'content-type': 'application/json' },
    });
    expect(refused.status).to.equal(403);
  });

  it('works from the keyboard: Tab reaches the navigation and every action; a confirmation starts on Cancel, Escape cancels, Tab and Enter confirm', async () => {
    const page = await admin();
    const focused = () => page.evaluate('document.activeElement?.getAttribute("aria-label") ?? document.activeElement?.textContent ?? ""') as Promise<string>;
    const reached: string[] = [];
    await page.evaluate('document.activeElement?.blur()');
    for (let i = 0; i < 20 && !reached.includes('Sign out'); i++) {
      await page.keyboard.press('Tab');
      reached.push(await focused());
    }
    expect(reached).to.include.members(['Overview', 'Folders', 'Tasks', 'Access tokens', 'Sign out']);

    await page.getByRole('navigation', { name: 'Pages' }).getByRole('button', { name: 'Folders', exact: true }).focus();
    await page.keyboard.press('Enter');
    await page
      .getByRole('status')
      .filter({ hasText: /^Live: / })
      .waitFor();
    const name = `keys-${process.pid}`;
    await page.getByLabel('Folder name').focus();
    await page.keyboard.type(name);
    await page.keyboard.press('Enter');
    await row(page, name).waitFor();

    await page.getByRole('button', { name: `Delete ${name}` }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').waitFor();
    expect(await focused()).to.equal('Cancel');
    await page.keyboard.press('Escape');
    await page.getByRole('dialog').waitFor({ state: 'detached' });
    expect(await folderNames()).to.include(name);
    await page.getByRole('button', { name: `Delete ${name}` }).focus();
    await page.keyboard.press('Enter');
    await page.getByRole('dialog').waitFor();
    await page.keyboard.press('Tab');
    expect(await focused()).to.equal('Delete');
    await page.keyboard.press('Enter');
    await row(page, name).waitFor({ state: 'detached' });
    expect(await folderNames()).not.to.include(name);
  });

  it('Activity filters: the list and the live tail keep only the rows that match, as GET /activity filters them', async () => {
    const page = await admin();
    await openPage(page, 'Activity', 'Activity');
    const tag = `filt-${process.pid}`;
    await page.getByLabel('Search').fill(`${tag}-a`);
    await page.getByLabel('Severity').selectOption('info');
    await page.getByRole('button', { name: 'Apply filter' }).click();
    await page.getByRole('cell', { name: 'Created folder', exact: false }).first().waitFor({ state: 'detached' });
    const token = await d.token('pages-filter', ['files.manage']);
    for (const n of ['b', 'a'])
      expect((await d.request('POST', `${API}/folders`, { token, body: { storage_id: 'default', name: `${tag}-${n}` } })).status).to.equal(201);
    await page.getByRole('cell', { name: `Created folder ${tag}-a`, exact: true }).waitFor({ timeout: 30_000 });
    // The stream delivers in order: b's row came first and was left out.
    expect(await page.getByRole('cell', { name: `Created folder ${tag}-b`, exact: true }).count()).to.equal(0);
    // The same filter on the API agrees with the page.
    const api = (await d.admin.request('GET', `${API}/activity?search=${tag}-a&severity=info`)).body.events.map((r: any) => r.summary);
    expect(api).to.deep.equal([`Created folder ${tag}-a`]);
    await screenshot(page, 'activity-filtered');
  });
});
