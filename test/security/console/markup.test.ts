/**
 * Text from the API is never markup on the console's pages: a folder whose
 * name is HTML (the folder rules allow '<', '>', '=' and quotes) shows as
 * those characters on the Folders and Activity pages, and no element of it
 * exists in the page (a page using innerHTML would create the <img> and the
 * <b>; the CSP would only stop the handler).
 */
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { hostctl, startDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { API } from '../../helpers/conformance.js';
import { ConsolePages, browserMissing, launchBrowser, openPage } from '../../helpers/browser.js';
import { requireOrSkip } from '../../helpers/runtime-gate.js';

describe('console: API text is never markup', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let pages: ConsolePages | undefined;
  const names = ['<img src=x onerror="window.__pwned=1">', '<b id=injected>bold'];

  before(async function () {
    requireOrSkip(this, 'console', browserMissing() ?? null);
    d = await startDaemon();
    pages = new ConsolePages(await launchBrowser());
  });

  after(async () => {
    await pages?.close();
  });

  const noMarkup = async (page: Page) => {
    expect(
      await page.evaluate('[document.querySelectorAll("main img").length, !!document.getElementById("injected"), window.__pwned === undefined]'),
    ).to.deep.equal([0, false, true]);
  };

  it('a folder named with HTML shows as text on Folders (list and contents) and Activity, and adds no element', async () => {
    for (const name of names) {
      const r = await d.admin.request('POST', `${API}/folders`, { storage_id: 'default', name });
      expect(r.status, JSON.stringify(r.body)).to.equal(201);
    }
    const url = await hostctl(d.dataDir, ['console']);
    expect(url.code, url.stderr).to.equal(0);
    const page = await pages!.admin(url.stdout.trim());
    await openPage(page, 'Folders', 'Folders');
    for (const name of names) await page.getByRole('cell', { name, exact: true }).waitFor();
    await page.getByRole('button', { name: `Open ${names[1]}` }).click();
    await page.getByRole('heading', { name: `Contents of ${names[1]}` }).waitFor();
    await noMarkup(page);
    await openPage(page, 'Activity', 'Activity');
    for (const name of names) await page.getByRole('cell', { name: `Created folder ${name}`, exact: true }).waitFor();
    await noMarkup(page);
  });
});
