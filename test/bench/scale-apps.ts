/**
 * The apps curve of the scale section: N apps installed through the API on a
 * private Docker engine (test/helpers/apps-lab.ts: the test engine in a
 * network namespace of its own, the busybox test image), each a compose
 * project with one running container (`sleep`, no published port): real
 * records of real projects, not the fake engine. GET /apps, and as the get
 * of one app GET /apps/{id}/docs of the first (the API has no GET of one
 * app: its docs are the one read of a single app's record that does not ask
 * the engine, as logs and stats do).
 *
 * N stops at 10 by default (BENCH_SCALE_APPS_MAX raises it): each install is
 * a `compose up -d`, about a second or more on this shared machine, so 100
 * would take minutes of the bench's budget.
 */
import { missingRuntime, stopEngines } from '../helpers/apps-engine.js';
import { APP_SCOPES, labDaemon, startLab } from '../helpers/apps-lab.js';
import type { TestDaemon } from '../helpers/daemon.js';
import { measureCurve, stepsUpTo } from './scale-curve.js';
import { caller } from './scale.js';

export async function appsCurve(): Promise<void> {
  const why = await missingRuntime();
  if (why) {
    process.stdout.write(`# scale apps skipped: ${why}\n`);
    return;
  }
  let d: TestDaemon | null = null;
  try {
    const lab = await startLab();
    d = await labDaemon(lab);
    const call = caller(d.url, await d.token('bench-scale-apps', APP_SCOPES));
    const content = `services:
  main:
    image: ${lab.image}
    init: true
    command: ["sleep", "1000000"]
`;
    let first = '';
    await measureCurve(
      {
        kind: 'apps',
        pid: d.proc.pid,
        grow: async (from, to) => {
          for (let i = from; i < to; i++) {
            const r = await call('POST', '/api/v1/apps', { template_id: 'custom', name: `scale${i}`, compose_content: content }, 201);
            if (r.app.state !== 'running') throw new Error(`app scale${i} answered state ${r.app.state}`);
            first ||= r.app.app_id ?? r.app.id;
          }
        },
        list: () => call('GET', '/api/v1/apps'),
        get: () => call('GET', `/api/v1/apps/${encodeURIComponent(first)}/docs`),
      },
      stepsUpTo(Number(process.env.BENCH_SCALE_APPS_MAX ?? 10)),
      20,
    );
  } finally {
    await d?.stop();
    await stopEngines();
  }
}
