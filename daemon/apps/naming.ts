/**
 * How an app is named on the host and on the engine: its id (from its name),
 * its data directory inside a pool, and its compose project.
 */
import path from 'node:path';
import { internalDirName } from '../lib/host-paths.js';

/** The directory the apps domain keeps in each pool (the host-path rule's convention). */
export const APPS_DIR = internalDirName('apps');

/** `My Media App!` -> `my-media-app`: lower case `[a-z0-9-]`, no `--`, no `-` at either end, 40 at most. */
export function slug(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 40)
    .replace(/-+$/, '');
}

/** Where an app's own data lives in a pool. */
export function dataDirOf(poolPath: string, appId: string): string {
  return path.join(poolPath, APPS_DIR, appId);
}

/**
 * The compose project of an app: `hostd_<app_id>_app`. Compose names each
 * container `<project>-<service>-<n>`, and app ids and service names both
 * hold `-`: with `hostd-<app_id>` (the first scheme), app `a` with service
 * `b-web` and app `a-b` with service `web` were both `hostd-a-b-web-1`. App
 * ids never hold `_` (slug), so here the first `_` ends the id and no two
 * apps' containers, networks or volumes share a name; the `hostd_` start
 * keeps them apart from those of the first scheme as well.
 */
export function projectName(appId: string): string {
  return `hostd_${appId}_app`;
}
