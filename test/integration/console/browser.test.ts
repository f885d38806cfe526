/**
 * The console in a real browser (Chromium from Debian, driven by
 * playwright-core, reaching nothing but loopback): sign-in with the one-time
 * URL `hostctl console` prints (refused the second time), the Access tokens
 * page creating a token that then works on the API and is refused once
 * revoked there, and a read-only token that sees no manage control and
 * whose manage calls the API refuses. A screenshot of each page goes to
 * test-artifacts/console/.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { hostctl, startDaemon, eventually, type TestDaemon } from '../../helpers/daemon.js';
import { API, expectError, raw } from '../../helpers/conformance.js';
import { browserMissing, launchBrowser, screenshot } from '../../helpers/browser.js';
import { requireOrSkip } from '../../helpers/runtime-gate.js';

describe('console in Chromium', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let browser: Browser | undefined;
  const contexts: BrowserContext[] = [];

  before(async function () {
    requireOrSkip(this, 'console', browserMissing() ?? null);
    d = await startDaemon();
    browser = await launchBrowser();
  });

  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
  });

  const newPage = async (): Promise<Page> => {
    const c = await browser!.newContext();
    contexts.push(c);
    const p = await c.newPage();
    // Every request the page makes goes to the daemon under test, nowhere else.
    p.on('request', (r) => {
      const u = new URL(r.url());
      if (u.hostname !== '127.0.0.1') throw new Error(`the console requested ${r.url()}`);
    });
    return p;
  };
  const signInUrl = async (): Promise<string> => {
    const r = await hostctl(d.dataDir, ['console']);
    expect(r.code, r.stderr).to.equal(0);
    return r.stdout.trim();
  };
  const signedInAdmin = async (): Promise<Page> => {
    const page = await newPage();
    await page.goto(await signInUrl());
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    return page;
  };

  it('signs in with the one-time URL (the address bar loses the secret); the same URL is refused the second time', async () => {
    const url = await signInUrl();
    const page = await newPage();
    await page.goto(url);
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    expect(page.url()).not.to.include('sign-in');
    await page.getByText('Administrator').waitFor();
    await page.getByRole('heading', { name: 'Members' }).waitFor();
    expect(await page.getByTestId('health-status').textContent()).to.match(/^(ok|degraded|critical)$/);
    await screenshot(page, 'overview');

    const again = await newPage();
    await again.goto(url);
    await again.getByRole('alert').filter({ hasText: 'already used' }).waitFor();
    await again.getByRole('heading', { name: 'Sign in to hostd' }).waitFor();
    await screenshot(again, 'sign-in-refused');
  });

  it('creates a token on Access tokens that works on the API, then revokes it there and the API refuses it', async () => {
    const page = await signedInAdmin();
    await page.getByRole('button', { name: 'Access tokens' }).click();
    await page.getByRole('heading', { name: 'Access tokens' }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('from-console');
    await page.getByLabel('vm.read', { exact: true }).check();
    await page.getByLabel('files.read', { exact: true }).check();
    await page.getByRole('button', { name: 'Create token' }).click();
    const secretBox = page.getByLabel('Token secret');
    await secretBox.waitFor();
    const secret = await secretBox.inputValue();
    expect(secret).to.match(/^hostd_/);
    await page.getByRole('cell', { name: 'files.read, vm.read' }).waitFor();
    await screenshot(page, 'access-tokens');

    expect((await d.request('GET', `${API}/folders`, { token: secret })).status).to.equal(200);
    expectError(await raw(d.url, 'GET', `${API}/system/health`, { token: secret }), 403, "'system.read'");
    // The console's call went through dispatch: one row, actor admin, client console.
    const rows = (await d.admin.request('GET', `${API}/activity?limit=50`)).body.events;
    const made = rows.find((r: any) => r.metadata.operation === 'tokens_create' && r.target === 'tokens/from-console');
    expect(made).to.include({ actor: 'admin' });
    expect(made.metadata).to.include({ transport: 'api', client: 'console' });

    // Revoking asks first: Cancel keeps it, Revoke ends it.
    await page.getByRole('button', { name: 'Revoke from-console' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    expect((await d.request('GET', `${API}/folders`, { token: secret })).status).to.equal(200);
    await page.getByRole('button', { name: 'Revoke from-console' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Revoke' }).click();
    await page.getByRole('button', { name: 'Revoke from-console' }).waitFor({ state: 'detached' });
    expectError(await raw(d.url, 'GET', `${API}/folders`, { token: secret }), 401);
  });

  it('a read-only token sees no manage control, and the API refuses the manage calls it could try', async () => {
    const token = await d.token('console-reader', ['system.read', 'proxy.read']);
    const page = await newPage();
    await page.goto(d.url);
    await page.getByLabel('API token').fill(token);
    await page.getByRole('button', { name: 'Sign in with token' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByText('Token console-reader').waitFor();
    await page.getByRole('heading', { name: 'Members' }).waitFor();
    await page.getByTestId('proxy-holder').waitFor();
    await screenshot(page, 'overview-read-only');
    expect(await page.getByRole('button', { name: 'Access tokens' }).count()).to.equal(0);
    expect(await page.getByRole('button', { name: /^Move proxy/ }).count()).to.equal(0);
    expect(await page.getByRole('button', { name: /^Revoke/ }).count()).to.equal(0);
    // The page keeps the token in memory only: nothing in storage or cookies, and a reload forgets it.
    expect(await page.evaluate('JSON.stringify([localStorage.length, sessionStorage.length, document.cookie])')).to.equal('[0,0,""]');
    expect(await page.context().cookies()).to.deep.equal([]);
    await page.reload();
    await page.getByRole('heading', { name: 'Sign in to hostd' }).waitFor();

    expectError(await raw(d.url, 'GET', `${API}/tokens`, { token }), 403, 'local administrator');
    expectError(await raw(d.url, 'POST', `${API}/proxy/move`, { token, body: '{}', headers: { 'content-type': 'application/json' } }), 403, "'proxy.manage'");
  });

  it('Activity shows a row written after the page opened without a reload (live from the event stream)', async () => {
    const page = await signedInAdmin();
    await page.getByRole('button', { name: 'Activity' }).click();
    await page.getByRole('heading', { name: 'Activity' }).waitFor();
    // Shown once the stream is open and the first rows are in: a row written from now on must appear by itself.
    await page.getByRole('status').filter({ hasText: 'Live: new rows appear at the top.' }).waitFor();
    const token = await d.token('console-live', ['files.manage']);
    const name = `live-${process.pid}`;
    expect((await d.request('POST', `${API}/folders`, { token, body: { storage_id: 'default', name } })).status).to.equal(201);
    await page.getByRole('cell', { name: `Created folder ${name}` }).waitFor({ timeout: 30_000 });
    await page.getByRole('cell', { name: 'console-live' }).first().waitFor();
    await screenshot(page, 'activity');
  });

  it('signs out: the session cookie is gone and the API refuses a call the page makes after it', async () => {
    const page = await signedInAdmin();
    expect((await page.context().cookies()).map((c) => c.name)).to.deep.equal(['hostd_console']);
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in to hostd' }).waitFor();
    await eventually(async () => (await page.context().cookies()).length === 0, 10_000, 'the cookie to be cleared');
    const status = await page.evaluate("fetch('/api/v1/whoami', { headers: { 'x-hostd-console': '1' } }).then((r) => r.status)");
    expect(status).to.equal(401);
  });
});
