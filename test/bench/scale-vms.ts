import { measureClients, measureCurve, stepsUpTo } from './scale-curve.js';
import { caller } from './scale.js';
import { withBenchVms } from './vms-daemon.js';

export async function vmsCurve(): Promise<void> {
  await withBenchVms('scale vms', async (env) => {
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
  });
}
