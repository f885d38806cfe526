/** The `locations:` section of the config file (docs/locations.md). */
import type { MountRoute } from './driver.js';

export interface LocationsSettings {
  /** The route new mounts take: by what the host has (`auto`), or pinned. */
  mountRoute: 'auto' | MountRoute;
  /** How often mounted locations are checked and lost ones retried. */
  checkIntervalMs: number;
  /** Bound of one check of a mount. */
  checkTimeoutMs: number;
  /** Bound of a discovery without host. */
  discoveryTimeoutMs: number;
}

/** Validates the section; an error names the setting. */
export function parseSettings(raw: unknown): LocationsSettings {
  const s = (raw ?? {}) as Record<string, unknown>;
  if (typeof s !== 'object' || Array.isArray(s)) throw new Error('locations: must be a mapping');
  const known = ['mount_route', 'check_interval_seconds', 'check_timeout_seconds', 'discovery_timeout_ms'];
  for (const k of Object.keys(s)) if (!known.includes(k)) throw new Error(`locations.${k}: unknown setting (known: ${known.join(', ')})`);
  const route = s.mount_route ?? 'auto';
  if (route !== 'auto' && route !== 'cifs' && route !== 'fuse') throw new Error(`locations.mount_route must be auto, cifs or fuse`);
  const num = (k: string, def: number, min: number, max: number): number => {
    const v = s[k] ?? def;
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max) throw new Error(`locations.${k} must be a number from ${min} to ${max}`);
    return v;
  };
  return {
    mountRoute: route,
    checkIntervalMs: num('check_interval_seconds', 30, 1, 86400) * 1000,
    checkTimeoutMs: num('check_timeout_seconds', 8, 1, 120) * 1000,
    discoveryTimeoutMs: num('discovery_timeout_ms', 3000, 200, 30000),
  };
}
