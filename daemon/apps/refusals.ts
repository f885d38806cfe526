/**
 * Apps whose stored compose file breaks a rule added since it was accepted
 * (a log driver, a sysctl): such a file is kept, listed (`refused` in the
 * app's view), logged at start, and refused with 409 whenever hostd would
 * start or apply it. Stopping and uninstalling always work; new content that
 * passes clears it.
 */
import { ApiError, conflict } from '../lib/errors.js';
import { parseCompose } from './compose/model.js';
import type { AppsContext } from './context.js';
import type { AppContent, AppRecord } from './records.js';

/**
 * Why the stored compose file of `r` breaks today's rules, or null; kept per
 * app until its content or variables change.
 */
export async function refusalOf(c: AppsContext, r: AppRecord, content?: AppContent): Promise<string | null> {
  const key = `${r.compose_sha256}\0${JSON.stringify(c.env(r))}`;
  const known = c.refusals.get(r.app_id);
  if (known && known.key === key) return known.why;
  let why: string | null = null;
  try {
    const stored = content ?? (await c.records.contentOf(r.app_id));
    parseCompose(stored.content, c.env(r), c.contentLabel(r));
  } catch (err) {
    if (!(err instanceof ApiError) || err.status !== 400) throw err;
    why = err.message;
  }
  c.refusals.set(r.app_id, { key, why });
  return why;
}

/** 409 when the stored definition breaks a rule added since it was accepted. */
export async function requireAccepted(c: AppsContext, r: AppRecord, content?: AppContent): Promise<void> {
  const why = await refusalOf(c, r, content);
  if (why)
    throw conflict(
      `app '${r.app_id}' is refused: its stored compose file breaks a rule added since it was installed (${why}); nothing was changed or removed: replace the file with PATCH /apps/${r.app_id}/compose`,
    );
}

/** Logs every app whose stored compose file breaks today's rules (at start; they stay listed in GET /apps). */
export async function audit(c: AppsContext): Promise<void> {
  for (const r of c.records.all()) {
    if (r.status !== 'installed') continue;
    const why = await refusalOf(c, r).catch((err) => (err as Error).message);
    if (why)
      c.log.warn(
        { app_id: r.app_id, refused: why },
        'apps: the stored compose file breaks a rule added since it was installed; the app is refused at its next start or change',
      );
  }
}

/** Starting from the stored definition, a 400 is the definition's (the caller sent nothing): 409. */
export function storedError(appId: string, err: unknown): unknown {
  if (err instanceof ApiError && err.status === 400) return conflict(`app '${appId}' cannot start from its stored definition: ${err.message}`);
  return err;
}
