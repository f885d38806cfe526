/**
 * The images an app's services need: which the engine lacks (or the file says
 * to pull always), and pulling them inside a task with byte progress. hostd
 * never pulls during `up` (`--pull never`): a pull is always a task.
 */
import { badRequest } from '../lib/errors.js';
import type { TaskHandle } from '../lib/tasks.js';
import type { AppCompose } from './compose/model.js';
import type { AppsContext } from './context.js';

/** Images the engine lacks (or that the file says to pull always); 400 for a missing one whose pull_policy is never. */
export async function imagesToPull(c: AppsContext, app: AppCompose, where: string): Promise<string[]> {
  const uniq = new Map<string, { pull: string; service: string }>();
  for (const i of app.images) if (!uniq.has(i.image) || i.pull === 'always') uniq.set(i.image, { pull: i.pull, service: i.service });
  const out: string[] = [];
  await Promise.all(
    [...uniq].map(async ([image, u]) => {
      const present = await c.driver.imageExists(image);
      if (u.pull === 'always' || !present) {
        if (u.pull === 'never') throw badRequest(`${where}: image '${image}' of service '${u.service}' is not on the engine and its pull_policy is never`);
        out.push(image);
      }
    }),
  );
  return out.sort();
}

/** Pulls images with progress over [from, to] of the task's percent. */
export async function pullAll(c: AppsContext, images: string[], t: TaskHandle, from: number, to: number): Promise<void> {
  for (const [i, image] of images.entries()) {
    t.log(`pulling ${image}`);
    const span = (to - from) / images.length;
    let last = -1;
    try {
      await c.driver.pull(
        image,
        (p) => {
          const pct = p.total > 0 ? p.current / p.total : 0;
          const v = Math.floor(from + span * i + span * pct);
          if (v !== last) {
            last = v;
            t.progress(v);
          }
        },
        t.signal,
      );
    } catch (err) {
      if (t.signal.aborted) throw err;
      throw new Error(pullError(image, err));
    }
    t.log(`pulled ${image}`);
    t.progress(from + span * (i + 1));
  }
}

function pullError(image: string, err: unknown): string {
  const msg = (err as Error)?.message ?? String(err);
  if (
    /dial tcp|no such host|connection refused|i\/o timeout|TLS handshake|network is unreachable|Temporary failure in name resolution|server misbehaving|no route to host/i.test(
      msg,
    )
  ) {
    return `cannot pull image '${image}': no registry is reachable (${msg.replace(/\s+/g, ' ').slice(0, 300)}); load the image into the engine (docker load / docker import) and install again`;
  }
  return `cannot pull image '${image}': ${msg.replace(/\s+/g, ' ').slice(0, 400)}`;
}
