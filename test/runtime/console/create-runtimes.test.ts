/**
 * Create forms against the real runtimes, in Chromium: an LXC container from
 * the busybox test image and an app from the cached test image (compose),
 * each made through its page's form and seen in the list. And the Tasks
 * page's recently finished tasks: a task that ran and ended while another
 * page was shown appears there when the page is opened again (its stream
 * resumes after the last event it saw).
 */
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { hostctl, type TestDaemon } from '../../helpers/daemon.js';
import { API } from '../../helpers/lxc-env.js';
import { lxcConsole } from '../../helpers/console-lxc.js';
import { appsRuntime, missingRuntime, stopEngines } from '../../helpers/apps-engine.js';
import { APP_SCOPES, labDaemon, startLab, type AppsLab } from '../../helpers/apps-lab.js';
import { COMPOSE } from '../../../daemon/apps/driver.js';
import { ConsolePages, browserMissing, launchBrowser, openForm, openPage, screenshot } from '../../helpers/browser.js';
import { requireOrSkip, requireRuntime } from '../../helpers/runtime-gate.js';

const row = (page: Page, name: string) => page.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) });

describe('console create forms with real LXC in Chromium', function () {
  this.timeout(300_000);
  const ui = lxcConsole();

  it('New container: made from the busybox image through the form, shown in the list, the same container the API lists', async () => {
    const page = await ui.pages.adminOf(ui.env.d.dataDir);
    await openPage(page, 'LXC', 'LXC containers');
    const name = `form-${process.pid}`;
    const form = await openForm(page, 'New container');
    await form.getByLabel('name', { exact: true }).fill(name);
    await form.getByLabel('template', { exact: true }).fill('bb');
    await form.getByRole('button', { name: 'Create container' }).click();
    const refusal = form.getByRole('alert').filter({ hasText: /./ });
    await row(page, name).or(refusal).first().waitFor({ timeout: 120_000 });
    expect(await refusal.count(), (await refusal.allTextContents()).join()).to.equal(0);
    await row(page, name).getByTestId('state').filter({ hasText: 'stopped' }).waitFor({ timeout: 60_000 });
    const made = (await ui.env.req('GET', '/lxc')).body.containers.find((c: any) => c.name === name);
    expect(made, 'the API lists it').to.not.equal(undefined);
    await screenshot(page, 'lxc-create');
    const del = await ui.env.req('DELETE', `/lxc/${made.lxcid}`);
    expect(del.status, del.text).to.equal(200);
  });

  it('Tasks: a task that ended while another page was shown is listed under Recently finished when the page opens again', async () => {
    const page = await ui.pages.adminOf(ui.env.d.dataDir);
    await openPage(page, 'Tasks', 'Tasks');
    const finished = page.getByRole('table', { name: 'Recently finished tasks' });
    await openPage(page, 'LXC', 'LXC containers');
    const id = `recent-${process.pid}`;
    const r = await hostctl(ui.env.d.dataDir, ['lxc', 'image', 'import', ui.env.image.rootfs, '--id', id]);
    expect(r.code, r.stderr).to.equal(0);
    // Ended: GET /tasks no longer lists it (it lists queued and running tasks only).
    expect((await ui.env.req('GET', '/tasks')).body.tasks.map((t: any) => t.title)).to.not.include(`Import LXC image ${id} to p1`);

    await openPage(page, 'Tasks', 'Tasks');
    const done = finished.getByRole('row').filter({ hasText: `Import LXC image ${id}` });
    await done.getByTestId('task-state').filter({ hasText: 'succeeded' }).waitFor({ timeout: 60_000 });
    expect(await done.getByRole('cell').nth(2).textContent()).to.include('100%');
    expect(await page.getByRole('table', { name: 'Queued and running tasks' }).getByText(`Import LXC image ${id}`).count()).to.equal(0);
    await screenshot(page, 'tasks-recent');
  });
});

describe('console create forms with a real Docker engine in Chromium', function () {
  this.timeout(300_000);
  let lab: AppsLab | undefined;
  let d: TestDaemon | undefined;
  let pages: ConsolePages | undefined;

  before(async function () {
    requireOrSkip(this, 'console', browserMissing() ?? null);
    await requireRuntime(this, 'apps', appsRuntime(), { need: [COMPOSE], also: missingRuntime });
    lab = await startLab();
    d = await labDaemon(lab);
    pages = new ConsolePages(await launchBrowser());
  });

  after(async () => {
    await pages?.close();
    await d?.stop();
    if (lab) await stopEngines();
  });

  it('New app: a compose app of the cached image installed through the form, running in the list', async () => {
    const tok = await d!.token('console-apps', APP_SCOPES);
    const page = await pages!.adminOf(d!.dataDir);
    await openPage(page, 'Apps', 'Apps');
    const name = `formapp${process.pid}`;
    const form = await openForm(page, 'New app');
    await form.getByLabel('template_id', { exact: true }).fill('custom');
    await form.getByLabel('name', { exact: true }).fill(name);
    await form
      .getByLabel('compose_content', { exact: true })
      .fill(`services:\n  main:\n    image: ${lab!.image}\n    init: true\n    command: ["sleep", "3600"]\n`);
    await form.getByRole('button', { name: 'Install app' }).click();
    const refusal = form.getByRole('alert').filter({ hasText: /./ });
    await row(page, name).or(refusal).first().waitFor({ timeout: 120_000 });
    expect(await refusal.count(), (await refusal.allTextContents()).join()).to.equal(0);
    await row(page, name).getByTestId('state').filter({ hasText: 'running' }).waitFor({ timeout: 120_000 });
    const app = (await d!.request('GET', `${API}/apps`, { token: tok })).body.apps.find((a: any) => a.name === name);
    expect(app?.state).to.equal('running');
    await screenshot(page, 'apps-create');
    const del = await d!.request('DELETE', `${API}/apps/${app.app_id}`, { token: tok });
    expect(del.status, del.text).to.equal(200);
  });
});
