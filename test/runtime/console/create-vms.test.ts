/**
 * The VM and sandbox create forms against real QEMU, in Chromium, on a blank
 * disk image (it boots nothing, and no test waits for a boot): New VM makes
 * a VM whose create task the form follows to its end, New sandbox makes a
 * sandbox the page lists; the test deletes both. At most one guest runs at a
 * time (the sandbox's), and none is left behind.
 */
import { expect } from 'chai';
import type { Page } from 'playwright-core';
import { eventually } from '../../helpers/daemon.js';
import { api, killGuests, qemuPids, requireVmsRuntime, startVmsDaemon, type VmsEnv } from '../../helpers/vms-fixture.js';
import { SANDBOX_YAML, importBlank } from '../../helpers/sandboxes-fixture.js';
import { ConsolePages, browserMissing, launchBrowser, openForm, openPage, screenshot } from '../../helpers/browser.js';
import { requireOrSkip } from '../../helpers/runtime-gate.js';

const row = (page: Page, name: string) => page.getByRole('row').filter({ has: page.getByRole('cell', { name, exact: true }) });

describe('console VM and sandbox create forms with real QEMU in Chromium', function () {
  this.timeout(600_000);
  let e: VmsEnv | undefined;
  let pages: ConsolePages | undefined;

  before(async function () {
    requireOrSkip(this, 'console', browserMissing() ?? null);
    await requireVmsRuntime(this, 'sandboxes');
    e = await startVmsDaemon({ extraYaml: SANDBOX_YAML() });
    await importBlank(e);
    pages = new ConsolePages(await launchBrowser());
  });

  after(async () => {
    await pages?.close();
    if (!e) return;
    await e.d.stop();
    await killGuests(e.root);
  });

  it('New VM: the form makes a VM from an image and follows its create task to its end; the test deletes it', async () => {
    const page = await pages!.adminOf(e!.d.dataDir);
    await openPage(page, 'VMs', 'Virtual machines');
    const name = `form-vm-${process.pid}`;
    const form = await openForm(page, 'New VM');
    await form.getByLabel('name', { exact: true }).fill(name);
    await form.getByLabel('image_id', { exact: true }).fill('blank');
    await form.getByRole('button', { name: 'Create VM' }).click();
    const refusal = form.getByRole('alert').filter({ hasText: /./ });
    await form.getByTestId('create-task-state').or(refusal).first().waitFor({ timeout: 120_000 });
    expect(await refusal.count(), (await refusal.allTextContents()).join()).to.equal(0);
    await form.getByTestId('create-task-state').filter({ hasText: 'succeeded' }).waitFor({ timeout: 300_000 });
    await row(page, name).getByTestId('state').filter({ hasText: 'stopped' }).waitFor({ timeout: 60_000 });
    const vm = (await api(e!, 'GET', '/vms')).body.vms.find((v: any) => v.name === name);
    expect(vm?.state).to.equal('stopped');
    await screenshot(page, 'vms-create');
    const del = await api(e!, 'DELETE', `/vms/${vm.vmid}`);
    expect(del.status, del.text).to.be.within(200, 202);
    await row(page, name).waitFor({ state: 'detached', timeout: 120_000 });
  });

  it('New sandbox: the form makes a sandbox (no wait for its boot) that the page lists; the test destroys it', async () => {
    const page = await pages!.withToken(e!.d.url, e!.token);
    await openPage(page, 'Sandboxes', 'Sandboxes');
    const name = `form-sbx-${process.pid}`;
    const form = await openForm(page, 'New sandbox');
    await form.getByLabel('image_id', { exact: true }).fill('blank');
    await form.getByLabel('name', { exact: true }).fill(name);
    await form.getByRole('button', { name: 'Create sandbox' }).click();
    const refusal = form.getByRole('alert').filter({ hasText: /./ });
    await row(page, name).or(refusal).first().waitFor({ timeout: 120_000 });
    expect(await refusal.count(), (await refusal.allTextContents()).join()).to.equal(0);
    const sbx = (await api(e!, 'GET', '/sandboxes')).body.sandboxes.find((s: any) => s.name === name);
    expect(sbx, 'the API lists it').to.not.equal(undefined);
    await screenshot(page, 'sandboxes-create');
    const del = await api(e!, 'DELETE', `/sandboxes/${sbx.id}`);
    expect(del.status, del.text).to.be.within(200, 202);
    await eventually(
      async () => {
        const s = (await api(e!, 'GET', `/sandboxes/${sbx.id}`)).body?.sandbox;
        return (!s || s.state === 'destroyed') && qemuPids(e!.root).length === 0;
      },
      180_000,
      'the sandbox destroyed and its guest ended',
    );
  });
});
