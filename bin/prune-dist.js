#!/usr/bin/env node
// Removes compiled files whose TypeScript source is gone (a file moved or
// deleted since the last build): tsc's incremental build never deletes them,
// and a stale test file in dist/ would still be run by `npm test`.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const dist = path.join(root, 'dist');
let removed = 0;
function walk(dir) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) {
      // dist/console is the console's bundle (bin/build-console.js), not tsc's output.
      if (p === path.join(dist, 'console')) continue;
      walk(p);
      if (fs.readdirSync(p).length === 0) fs.rmdirSync(p);
      continue;
    }
    const m = /^(.*)\.(js|js\.map|d\.ts|d\.ts\.map)$/.exec(e.name);
    if (!m) continue;
    const rel = path.relative(dist, path.join(dir, m[1]));
    if (!fs.existsSync(path.join(root, `${rel}.ts`))) {
      fs.rmSync(p);
      removed++;
    }
  }
}
if (fs.existsSync(dist)) walk(dist);
if (removed) console.log(`prune-dist: removed ${removed} compiled file(s) whose source is gone`);
