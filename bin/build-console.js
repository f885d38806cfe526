#!/usr/bin/env node
// Builds the web console into dist/console: type-checks console/src with its
// own tsconfig (DOM types), bundles it with esbuild into one minified file,
// and copies the page and the stylesheet. Run by `npm run build` (and so by
// `npm ci`); nothing is fetched at run time.
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const src = path.join(root, 'console');
const out = path.join(root, 'dist/console');

execFileSync(process.execPath, [path.join(root, 'node_modules/typescript/bin/tsc'), '-p', path.join(src, 'tsconfig.json')], { stdio: 'inherit' });
fs.rmSync(out, { recursive: true, force: true });
fs.mkdirSync(out, { recursive: true });
await build({
  entryPoints: [path.join(src, 'src/main.ts')],
  outfile: path.join(out, 'app.js'),
  bundle: true,
  minify: true,
  format: 'esm',
  target: 'es2020',
  legalComments: 'none',
  logLevel: 'warning',
});
for (const f of ['index.html', 'app.css']) fs.copyFileSync(path.join(src, f), path.join(out, f));
const gz = ['app.js', 'app.css', 'index.html'].reduce((n, f) => n + zlib.gzipSync(fs.readFileSync(path.join(out, f)), { level: 9 }).length, 0);
process.stdout.write(`console: dist/console built, ${gz} bytes gzip-compressed\n`);
