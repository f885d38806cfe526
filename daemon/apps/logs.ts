/**
 * apps_logs: the last lines of every container of an app, merged by time.
 * The tail (default 100, at most 10000: the registry's rule) applies to each
 * container, then to the merge.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { AppsContext } from './context.js';
import { ENGINE } from './driver.js';

export const DEFAULT_LOG_TAIL = 100;

export async function appLogs(c: AppsContext, args: ArgsOf<'apps_logs'>): Promise<ResultOf<'apps_logs'>> {
  await c.ready([ENGINE]);
  const r = c.record(args.app_id);
  const tail = args.tail ?? DEFAULT_LOG_TAIL;
  const cs = await c.driver.containers({ project: r.project });
  const per = await Promise.all(
    cs.map(async (x) => {
      // A container removed since the listing has no logs.
      const lines =
        tail === 0
          ? []
          : await c.driver.logs(x.container_id, tail).catch((err) => {
              if ((err as { statusCode?: number }).statusCode === 404) return [];
              throw err;
            });
      return lines.map((l) => ({ service: x.service ?? '', container: x.name, ...l }));
    }),
  );
  const all = per.flat().sort((a, b) => a.time.localeCompare(b.time));
  return { app_id: r.app_id, tail, lines: all.slice(Math.max(0, all.length - tail)) };
}
