/**
 * The console against real LXC (the busybox test image) in Chromium: the
 * Tasks page watching an image import from its start to its end on the event
 * stream alone (the page asks the API for no task after it opened, until a
 * task is followed), with the followed task's log; and the LXC page starting
 * a container, showing a stop made elsewhere without a reload, and deleting
 * it after a confirmation.
 */
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { hostctl } from '../../helpers/daemon.js';
import { API } from '../../helpers/lxc-env.js';
import { lxcConsole } from '../../helpers/console-lxc.js';
import { openPage, screenshot } from '../../helpers/browser.js';

describe('console with real LXC in Chromium', function () {
  this.timeout(300_000);
  const ui = lxcConsole();
  const admin = (): Promise<Page> => ui.pages.adminOf(ui.env.d.dataDir);

  it('watch a task: an image import appears, progresses and ends on the Tasks page from the event stream; following it shows its log once, in order', async () => {
    const page = await admin();
    await openPage(page, 'Tasks', 'Tasks');
    const seen = ui.pages.requests.get(page)!;
    const from = seen.length;
    const id = `watch-${process.pid}`;
    const imported = hostctl(ui.env.d.dataDir, ['lxc', 'image', 'import', ui.env.image.rootfs, '--id', id]);
    const row = page.getByRole('row').filter({ hasText: `Import LXC image ${id}` });
    await row.waitFor({ timeout: 60_000 });
    // Followed as soon as it shows: its lines come from the log read, the stream, or both, and each is shown once.
    await row.getByRole('button', { name: /^Follow / }).click();
    const r = await imported;
    expect(r.code, r.stderr).to.equal(0);
    await row.getByTestId('task-state').filter({ hasText: 'succeeded' }).waitFor({ timeout: 60_000 });
    expect(await row.getByRole('cell').nth(2).textContent()).to.include('100%');
    await page.getByTestId('followed-state').filter({ hasText: 'succeeded' }).waitFor({ timeout: 60_000 });

    const task = (await ui.env.req('GET', '/tasks')).body.tasks.find((t: any) => t.title === `Import LXC image ${id} to p1`);
    expect(task, 'an ended task is no longer in GET /tasks').to.equal(undefined);
    const lines = await page.getByRole('list', { name: 'Log lines' }).getByRole('listitem').allTextContents();
    expect(lines[0]).to.equal(`copying ${ui.env.image.rootfs}`);
    expect(lines.some((l) => /bytes, SHA-256 [0-9a-f]{64}$/.test(l))).to.equal(true);
    expect(new Set(lines).size, 'each line once').to.equal(lines.length);
    await screenshot(page, 'tasks');
    // Before the click on Follow, the page asked the API nothing about tasks: the row, its progress and its end came from the stream.
    const asked = seen.slice(from).filter((u) => u.startsWith('GET /api/v1/tasks'));
    expect(
      asked.every((u) => /^GET \/api\/v1\/tasks\/task_[^/?]+(\/logs\?.*)?$/.test(u)),
      asked.join('\n'),
    ).to.equal(true);
  });

  it('LXC: Start from the page, a stop made elsewhere shown without a reload, Delete after a confirmation', async () => {
    const name = `con-${process.pid}`;
    const made = await ui.env.req('POST', '/lxc', { name, template: 'bb' });
    expect(made.status, made.text).to.equal(201);
    const id = made.body.container.lxcid;
    const page = await admin();
    await openPage(page, 'LXC', 'LXC containers');
    const row = page.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) });
    await row.getByTestId('state').filter({ hasText: 'stopped' }).waitFor();

    await page.getByRole('button', { name: `Start ${name}` }).click();
    await row.getByTestId('state').filter({ hasText: 'running' }).waitFor({ timeout: 60_000 });
    expect((await ui.env.req('GET', `/lxc/${id}`)).body.container.state).to.equal('running');
    const started = (await ui.env.d.admin.request('GET', `${API}/activity?limit=50`)).body.events.find(
      (e: any) => e.metadata.operation === 'lxc_start' && e.metadata.client === 'console',
    );
    expect(started, "the start was an API call marked as the console's").to.not.equal(undefined);
    await screenshot(page, 'lxc');

    const stop = await ui.env.req('POST', `/lxc/${id}/stop`);
    expect(stop.status, stop.text).to.equal(200);
    await row.getByTestId('state').filter({ hasText: 'stopped' }).waitFor({ timeout: 60_000 });
    await page.getByRole('button', { name: `Start ${name}` }).waitFor();

    await page.getByRole('button', { name: `Delete ${name}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Cancel' }).click();
    expect((await ui.env.req('GET', `/lxc/${id}`)).status).to.equal(200);
    await page.getByRole('button', { name: `Delete ${name}` }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Delete' }).click();
    await row.waitFor({ state: 'detached', timeout: 60_000 });
    expect((await ui.env.req('GET', `/lxc/${id}`)).status).to.equal(404);
  });
});
