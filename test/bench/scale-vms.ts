/**
 * The stopped-VM curve of the scale section: N linked clones of the test
 * guest image (POST /vms with linked_clone, never started: a qcow2 overlay
 * and a record each), GET /vms and GET /vms/{id} of the first. Then linked-
 * clone creates with 1, 4 and 16 clients in flight. No QEMU runs here.
 */
import { guestImage } from '../helpers/vms-guest.js';
import { killGuests, missingRuntime, startVmsDaemon, succeeded, type VmsEnv } from '../helpers/vms-fixture.js';
import { measureClients, measureCurve, stepsUpTo } from './scale-curve.js';
import { caller } from './scale.js';

export async function vmsCurve(): Promise<void> {
  const why = await missingRuntime();
  if (why) {
    process.stdout.write(`# scale vms skipped: ${why}\n`);
    return;
  }
  const image = await guestImage();
  let e: VmsEnv | null = null;
  try {
    e = await startVmsDaemon();
    const env = e;
    const imp = await env.d.admin.request('POST', '/admin/vms/images/import', { file: image, image_id: 'bench', default_user: 'debian' });
    await succeeded(env, imp.body.task.task_id);
    const call = caller(env.d.url, env.token);
    let first = 0;
    const make = async (name: string) => {
      const r = await call('POST', '/api/v1/vms', { name, image_id: 'bench', linked_clone: true }, 201);
      return r.vm.vmid as number;
    };
    await measureCurve(
      {
        kind: 'vms',
        pid: env.d.proc.pid,
        grow: async (from, to) => {
          for (let i = from; i < to; i++) {
            const id = await make(`stopped-${i}`);
            first ||= id;
          }
        },
        list: () => call('GET', '/api/v1/vms'),
        get: () => call('GET', `/api/v1/vms/${first}`),
      },
      stepsUpTo(Number(process.env.BENCH_SCALE_VMS_MAX ?? 1000)),
    );
    await measureClients('vms', Number(process.env.BENCH_SCALE_VM_CREATES ?? 32), (i) => make(`c-${i}`));
  } finally {
    if (e) {
      await killGuests(e.root);
      await e.d.stop();
    }
  }
}
