/**
 * The console across a cluster of two daemons on loopback (alpha, bravo), in
 * Chromium, signed in on alpha: the member picker lists both, and with bravo
 * chosen the Folders page shows and changes bravo's folders through alpha
 * (`peer_id` on every call); the administrator session choosing bravo sees
 * the API's refusal; the proxy page moves the holder to bravo and shows a
 * move made elsewhere from the event stream.
 */
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { pair } from '../../cluster/util.js';
import { API } from '../../helpers/conformance.js';
import { ConsolePages, browserMissing, launchBrowser, openPage, screenshot } from '../../helpers/browser.js';
import { requireOrSkip } from '../../helpers/runtime-gate.js';

describe('console across two members in Chromium', function () {
  this.timeout(240_000);
  let a: TestDaemon | undefined;
  let b: TestDaemon | undefined;
  let token: string;
  let pages: ConsolePages | undefined;
  // Generous: a forwarded call on a loaded machine must not miss its deadline.
  const env = { HOSTD_FORWARD_DEADLINE_MS: '20000', HOSTD_CLUSTER_PROBE_MS: '500' };

  before(async function () {
    requireOrSkip(this, 'console', browserMissing() ?? null);
    [a, b] = await Promise.all([startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'alpha' } }), startDaemon({ env: { ...env, HOSTD_NODE_NAME: 'bravo' } })]);
    await pair([a, b]);
    token = await a.token('console-ops', ['files.read', 'files.manage', 'system.read', 'proxy.read', 'proxy.manage']);
    pages = new ConsolePages(await launchBrowser());
  });

  after(async () => {
    await pages?.close();
    await Promise.all([a, b].map((d) => d?.stop()));
  });

  const names = async (d: TestDaemon): Promise<string[]> => (await d.admin.request('GET', `${API}/folders`)).body.folders.map((f: any) => f.name);
  const row = (page: Page, name: string) => page.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) });

  it("with bravo chosen in the member picker, the Folders page shows and changes bravo's folders through alpha", async () => {
    expect((await a!.admin.request('POST', `${API}/folders`, { storage_id: 'default', name: 'on-alpha' })).status).to.equal(201);
    expect((await b!.admin.request('POST', `${API}/folders`, { storage_id: 'default', name: 'on-bravo' })).status).to.equal(201);
    const page = await pages!.withToken(a!.url, token);
    const picker = page.getByLabel('Member', { exact: true });
    expect(await picker.locator('option').allTextContents()).to.have.members(['alpha (this host)', 'bravo']);
    await openPage(page, 'Folders', 'Folders');
    await row(page, 'on-alpha').waitFor();

    await picker.selectOption({ label: 'bravo' });
    await page.getByText('Showing member bravo').waitFor();
    await page
      .getByRole('status')
      .filter({ hasText: /^Live: / })
      .waitFor();
    await row(page, 'on-bravo').waitFor();
    expect(await row(page, 'on-alpha').count()).to.equal(0);

    await page.getByLabel('Folder name').fill('made-for-bravo');
    await page.getByRole('button', { name: 'Create folder' }).click();
    await row(page, 'made-for-bravo').waitFor();
    expect(await names(b!)).to.include('made-for-bravo');
    expect(await names(a!)).not.to.include('made-for-bravo');
    await screenshot(page, 'member-picker');

    // Every call went to alpha (the page's origin), bravo's with its peer_id.
    const origin = new URL(a!.url).port;
    expect(new URL(page.url()).port).to.equal(origin);
    const seen = pages!.requests.get(page)!;
    expect(seen).to.include(`GET /api/v1/folders?peer_id=${b!.nodeId}`);
    expect(seen.some((u) => u.startsWith('GET /api/v1/events/stream?') && u.includes(`peer_id=${b!.nodeId}`))).to.equal(true);
  });

  it("the administrator session choosing bravo sees the API's refusal (no administrator claim crosses the mesh)", async () => {
    const page = await pages!.adminOf(a!.dataDir);
    const refusal = await a!.admin.request('GET', `${API}/folders?peer_id=${b!.nodeId}`);
    expect(refusal.status).to.equal(403);
    await page.getByLabel('Member', { exact: true }).selectOption({ label: 'bravo' });
    await openPage(page, 'Folders', 'Folders');
    await page.getByRole('main').getByRole('alert').filter({ hasText: refusal.body.error }).waitFor();
  });

  it('move the proxy: the Proxy page moves the holder to bravo, and shows a move made elsewhere from the proxy.holder event', async () => {
    const page = await pages!.withToken(a!.url, token);
    await openPage(page, 'Proxy', 'Proxy');
    const holder = page.getByTestId('proxy-holder');
    await holder.filter({ hasText: /^alpha$/ }).waitFor();
    await page.getByRole('button', { name: 'Move proxy to bravo' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Move proxy' }).click();
    await holder.filter({ hasText: /^bravo$/ }).waitFor({ timeout: 60_000 });
    // The controls follow the holder in the same redraw: no move to bravo once bravo is shown, and a move back to alpha offered.
    expect(await page.getByRole('button', { name: 'Move proxy to bravo' }).count()).to.equal(0);
    await page.getByRole('button', { name: 'Move proxy to alpha' }).waitFor();
    expect((await a!.admin.request('GET', `${API}/proxy/config`)).body.holder).to.equal(b!.nodeId);
    await screenshot(page, 'proxy');

    const back = await a!.request('POST', `${API}/proxy/move`, { token, body: { peer_id: a!.nodeId } });
    expect(back.status, back.text).to.equal(200);
    await holder.filter({ hasText: /^alpha$/ }).waitFor({ timeout: 60_000 });
    await page.getByRole('button', { name: 'Move proxy to bravo' }).waitFor();
    expect(await page.getByRole('button', { name: 'Move proxy to alpha' }).count()).to.equal(0);
  });
});
