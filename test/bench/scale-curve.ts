/**
 * One curve of the scale section: a daemon grows to N = 1, 10, 100, ... of a
 * kind of resource, and at each step the p50 of its list and of a get of one
 * of them, and the daemon's resident memory, each beside the N = 1 step of
 * the same run:
 *
 *   scale_<kind>_list_ms_n<N>   (expected linear in N: a list answers N records)
 *   scale_<kind>_get_ms_n<N>    (expected flat)
 *   scale_<kind>_rss_mb_n<N>
 *   scale_<kind>_{list,get}_ms_ratio_n<N>
 *
 * and, with `clients`, creates per second with 1, 4 and 16 in flight:
 *
 *   scale_<kind>_create_per_s_c<C>  (expected rising up to the cores, then flat)
 */
import { latencies, pct, print } from './lib.js';
import { rssMb, throughput } from './scale.js';

export interface Curve {
  kind: string;
  pid: number | undefined;
  /** Makes the resources number `from` .. `to - 1`. */
  grow(from: number, to: number): Promise<void>;
  list(): Promise<unknown>;
  /** A get of one resource (the first one made). */
  get(): Promise<unknown>;
}

export async function measureCurve(c: Curve, steps: number[], samples = 40): Promise<void> {
  let made = 0;
  const base: Record<string, number> = {};
  for (const n of steps) {
    await c.grow(made, n);
    made = n;
    if (n === steps[0]) {
      // Warm up (JIT, connections) before the first step, every curve's baseline.
      for (let i = 0; i < 50; i++) {
        await c.list();
        await c.get();
      }
    }
    // Fewer samples of a list that grows long: its p50 still comes from a dozen or more.
    const k = n >= 1000 ? Math.max(12, Math.floor(samples / 3)) : samples;
    const figures: Record<string, number> = {
      list_ms: pct(await latencies(k, () => c.list()), 0.5),
      get_ms: pct(await latencies(samples, () => c.get()), 0.5),
      rss_mb: rssMb(c.pid),
    };
    for (const [key, v] of Object.entries(figures)) {
      print(`scale_${c.kind}_${key}_n${n}`, v, key === 'rss_mb' ? 1 : 3);
      if (base[key] === undefined) base[key] = v;
      else if (key !== 'rss_mb') print(`scale_${c.kind}_${key}_ratio_n${n}`, v / base[key]);
    }
  }
}

/** Creates per second with 1, 4 and 16 clients in flight, `per` creates each. */
export async function measureClients(kind: string, per: number, create: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  for (const c of [1, 4, 16]) {
    print(`scale_${kind}_create_per_s_c${c}`, await throughput(per, c, () => create(next++)), 2);
  }
}

/** The steps up to `max`. */
export const stepsUpTo = (max: number): number[] => [1, 10, 100, 1000].filter((s) => s <= max);
