/**
 * The LXC curve of the scale section: N busybox containers (the test image
 * of test/helpers/lxc-image.ts), each created and started through the API,
 * all running while the step is measured: GET /lxc and GET /lxc/{id} of the
 * first. Then creates (not started) with 1, 4 and 16 clients in flight.
 *
 * N stops at 100 by default (BENCH_SCALE_LXC_MAX raises it): 1,000 running
 * containers is about 1,000 creates and starts, then 1,000 stops at cleanup,
 * several minutes on this shared 2-core machine, more than the whole bench's
 * budget allows.
 */
import { cleanupLxc, lxcEnv, lxcMissing } from '../helpers/lxc-env.js';
import { measureClients, measureCurve, stepsUpTo } from './scale-curve.js';
import { caller } from './scale.js';

export async function lxcCurve(): Promise<void> {
  const missing = lxcMissing();
  if (missing) {
    process.stdout.write(`# scale lxc skipped: ${missing}\n`);
    return;
  }
  try {
    const env = await lxcEnv();
    const call = caller(env.d.url, env.token);
    let first = 0;
    const make = async (name: string, start: boolean) => {
      const c = await call('POST', '/api/v1/lxc', { name, template: 'bb' }, 0);
      const id = c.container.lxcid as number;
      if (start) await call('POST', `/api/v1/lxc/${id}/start`, undefined, 0);
      return id;
    };
    await measureCurve(
      {
        kind: 'lxc',
        pid: env.d.proc.pid,
        grow: async (from, to) => {
          for (let i = from; i < to; i++) {
            const id = await make(`run-${i}`, true);
            first ||= id;
          }
        },
        list: () => call('GET', '/api/v1/lxc'),
        get: () => call('GET', `/api/v1/lxc/${first}`),
      },
      stepsUpTo(Number(process.env.BENCH_SCALE_LXC_MAX ?? 100)),
    );
    await measureClients('lxc', Number(process.env.BENCH_SCALE_LXC_CREATES ?? 12), (i) => make(`c-${i}`, false));
  } finally {
    await cleanupLxc();
  }
}
