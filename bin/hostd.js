#!/usr/bin/env node
// The hostd command (package.json "bin"; deploy/install.sh links it into /usr/local/bin).
//
// It runs the build in dist/. `npm start` sets HOSTD_BUILD_IF_STALE=1: then a
// build older than the sources (or none) is rebuilt first, incrementally,
// and an up-to-date one starts at once (the compiler costs 20 s or more even
// with nothing to do). The installed command never compiles: it says when
// dist/ is older than the sources and runs it.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, rmSync, statSync, utimesSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const entry = join(root, 'dist/daemon/main.js');
// tsc's incremental state (tsconfig.json tsBuildInfoFile): its time is the build's.
const stamp = join(root, 'dist/.tsbuildinfo');
// What the daemon is built from (test/ is built too, but the daemon does not run it).
const SOURCES = ['api', 'daemon', 'cluster', 'certs'];
const CONFIGS = ['tsconfig.json', 'package-lock.json'];

/** The newest source file and its time (a walk of a few hundred files: milliseconds). */
function newestSource() {
  let newest = { file: null, ms: 0 };
  const see = (file) => {
    const ms = statSync(file).mtimeMs;
    if (ms > newest.ms) newest = { file, ms };
  };
  const walk = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = join(dir, e.name);
      if (e.isDirectory()) {
        if (e.name !== 'node_modules') walk(p);
      } else if (e.name.endsWith('.ts')) see(p);
    }
  };
  for (const d of SOURCES) if (existsSync(join(root, d))) walk(join(root, d));
  for (const f of CONFIGS) if (existsSync(join(root, f))) see(join(root, f));
  return newest;
}

/** Why dist/ cannot be run as it is, or null when it is up to date. */
function staleness() {
  if (!existsSync(entry)) return `${entry} is missing`;
  if (!existsSync(stamp)) return `${stamp} is missing (dist/ was not built by this checkout's tsconfig)`;
  const src = newestSource();
  return src.ms > statSync(stamp).mtimeMs ? `${src.file.slice(root.length)} is newer than the build` : null;
}

const buildIfStale = process.env.HOSTD_BUILD_IF_STALE === '1';
delete process.env.HOSTD_BUILD_IF_STALE;
const why = staleness();
if (why && buildIfStale) {
  const tsc = join(root, 'node_modules/typescript/bin/tsc');
  if (!existsSync(tsc)) {
    process.stderr.write(`hostd: ${why}, and the compiler is not installed: run npm ci in ${root}\n`);
    process.exit(1);
  }
  process.stderr.write(`hostd: building first (${why})\n`);
  // An incremental build does not notice an output deleted behind its back: forget its state then.
  if (!existsSync(entry)) rmSync(stamp, { force: true });
  const r = spawnSync(process.execPath, [tsc, '-p', join(root, 'tsconfig.json')], { cwd: root, stdio: 'inherit' });
  if (r.status !== 0) process.exit(r.status ?? 1);
  // An incremental build with nothing to emit leaves its state file as it was: mark the build as now.
  const now = new Date();
  utimesSync(stamp, now, now);
} else if (why && !existsSync(entry)) {
  process.stderr.write(`hostd: ${entry} is missing: build hostd first (npm ci, or npm run build, in ${root})\n`);
  process.exit(1);
} else if (why) {
  process.stderr.write(`hostd: warning: running an old build (${why}); run npm run build in ${root}\n`);
}
await import(new URL('../dist/daemon/main.js', import.meta.url).href);
