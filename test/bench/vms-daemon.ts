/**
 * The VM daemon the VM bench sections run against: the test guest imported
 * as image `bench`. Says why and does nothing when QEMU is missing; stops
 * every guest it ran and the daemon after, also when the section failed.
 */
import { guestImage } from '../helpers/vms-guest.js';
import { killGuests, missingRuntime, startVmsDaemon, succeeded, type VmsEnv } from '../helpers/vms-fixture.js';

export async function withBenchVms(section: string, fn: (env: VmsEnv) => Promise<void>): Promise<void> {
  const why = await missingRuntime();
  if (why) {
    process.stdout.write(`# ${section} skipped: ${why}\n`);
    return;
  }
  const image = await guestImage();
  let e: VmsEnv | null = null;
  try {
    e = await startVmsDaemon();
    const imp = await e.d.admin.request('POST', '/admin/vms/images/import', { file: image, image_id: 'bench', default_user: 'debian' });
    await succeeded(e, imp.body.task.task_id);
    await fn(e);
  } finally {
    if (e) {
      await killGuests(e.root);
      await e.d.stop();
    }
  }
}
