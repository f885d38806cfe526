/**
 * The one gate of runtime tests (test/runtime/<domain>/): before a suite
 * drives a real host program, it asks the domain's own driver what is
 * available (`RuntimeDriver.availability`, the same answer host-status
 * gives), plus anything else the suite needs (root, a test image).
 *
 * - Everything there: the suite runs.
 * - Something missing on a developer's machine: the suite skips, printing
 *   the domain and what is missing (never silently).
 * - Something missing with CI set (`.ci/run` exports CI=1): the suite fails.
 *   CI installs every runtime (deploy/install-deps.sh), so a runtime test that
 *   cannot run there is a broken CI machine, not a pass.
 *
 *   before(async function () {
 *     await requireRuntime(this, 'lxc', driver, { need: ['lxc-start', 'lxc-attach'], also: needRoot });
 *   });
 */
import type { Availability, RuntimeDriver } from '../../daemon/lib/availability.js';

/** The domain's driver, or a function answering what it would. */
export type AvailabilitySource = RuntimeDriver | (() => Promise<Availability[]>);

export interface GateOptions {
  /** Programs the suite needs (by Availability name); every one the driver reports when omitted. */
  need?: readonly string[];
  /** What else the suite needs: why it is missing, or null. */
  also?: () => Promise<string | null> | string | null;
  /** The environment to read CI from (the test process's by default). */
  env?: Readonly<Record<string, string | undefined>>;
}

/** Whether the suite runs under CI: CI set to anything but '', '0' or 'false'. */
export function inCi(env: Readonly<Record<string, string | undefined>> = process.env): boolean {
  const v = env.CI;
  return v !== undefined && v !== '' && v !== '0' && v.toLowerCase() !== 'false';
}

/** What the gate does with `why` (null: nothing is missing). */
export function gateDecision(
  domain: string,
  why: string | null,
  env: Readonly<Record<string, string | undefined>> = process.env,
): { action: 'run' | 'skip' | 'fail'; message: string } {
  if (!why) return { action: 'run', message: '' };
  if (inCi(env)) {
    return {
      action: 'fail',
      message: `the ${domain} runtime tests cannot run: ${why}. CI installs every runtime (deploy/install-deps.sh), so a runtime test that would skip fails the run`,
    };
  }
  return { action: 'skip', message: `skipped (${domain} runtime): ${why}` };
}

/** Why the domain's runtime tests cannot run here, or null. */
export async function runtimeProblem(source: AvailabilitySource, opts: GateOptions = {}): Promise<string | null> {
  const list = typeof source === 'function' ? await source() : await source.availability({ fresh: true });
  const picked = opts.need
    ? opts.need.map((n) => list.find((a) => a.name === n) ?? { name: n, available: false, reason: 'the driver does not report it' })
    : list;
  const gone = picked.filter((a) => !a.available);
  if (gone.length) return gone.map((a) => `${a.name} is not available (${a.reason ?? 'no reason given'})`).join('; ');
  return (await opts.also?.()) ?? null;
}

/** Runs, skips with a visible reason, or under CI fails: see the module comment. */
export async function requireRuntime(ctx: Mocha.Context, domain: string, source: AvailabilitySource, opts: GateOptions = {}): Promise<void> {
  const d = gateDecision(domain, await runtimeProblem(source, opts), opts.env);
  if (d.action === 'run') return;
  if (d.action === 'fail') throw new Error(d.message);
  process.stdout.write(`      ${d.message}\n`);
  ctx.skip();
}

/**
 * The same gate for a suite whose need is not a domain's driver (a Python
 * module, network namespaces, a test image): `why` is what is missing, or
 * null. Skips with the reason printed, or under CI fails.
 */
export function requireOrSkip(ctx: Mocha.Context, domain: string, why: string | null, env?: Readonly<Record<string, string | undefined>>): void {
  const d = gateDecision(domain, why, env);
  if (d.action === 'run') return;
  if (d.action === 'fail') throw new Error(d.message);
  process.stdout.write(`      ${d.message}\n`);
  ctx.skip();
}
