/**
 * Commands in a running container (`/bin/sh -c` through lxc-attach): refused
 * while frozen or stopped, and in a container that breaks a rule now. The
 * activity row says how it ended, never what was run.
 */
import type { ArgsOf, ResultOf } from '../../api/registry/index.js';
import type { NoteSink } from '../lib/caller.js';
import { conflict } from '../lib/errors.js';
import type { LxcContext } from './context.js';
import { lxcNameOf } from './naming.js';
import { stateName, type StateName } from './views.js';

/** A timer cannot wait longer than 2^31-1 ms (about 24.8 days): longer deadlines are that. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

export class Exec {
  constructor(private readonly ctx: LxcContext) {}

  async exec(a: ArgsOf<'lxc_exec'>, ctx: NoteSink): Promise<ResultOf<'lxc_exec'>> {
    const { ctx: c } = this;
    const rec = await c.record(a.id);
    const name = lxcNameOf(a.id);
    const fast = c.driver.cgroups.fastState(name);
    let st: StateName;
    if (fast) st = stateName(fast);
    else {
      await c.require(['lxc-info', 'lxc-attach']);
      st = await c.state(rec);
    }
    if (st === 'frozen') throw conflict(`container ${a.id} is frozen; unfreeze it first`);
    if (st !== 'running') throw conflict(`container ${a.id} is not running (it is ${st})`);
    // A container started before the rules (or whose mount changed since) may hold what exec must not reach.
    await c.refuseViolations(rec, 'run commands');
    const timeout = Math.min((a.timeout_seconds || 60) * 1000, LONGEST_TIMER_MS);
    const r = await c.driver.tools.exec(name, a.command, timeout);
    ctx.note({
      summary: r.timed_out
        ? `Command in container ${a.id} '${rec.name}' killed at its ${Math.round(timeout / 1000)} s deadline`
        : `Ran a command in container ${a.id} '${rec.name}' (exit ${r.exit_code})`,
      target: `lxc/${a.id}`,
      metadata: { exit_code: r.exit_code, timed_out: r.timed_out, truncated: r.truncated, duration_ms: r.duration_ms },
    });
    return { lxcid: a.id, ...r };
  }
}
