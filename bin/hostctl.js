#!/usr/bin/env node
// The hostctl command (package.json "bin"; deploy/install.sh links it into /usr/local/bin).
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const entry = new URL('../dist/daemon/cli/main.js', import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write(
    `hostctl: ${fileURLToPath(entry)} is missing: build hostd first (npm ci, or npm run build, in ${fileURLToPath(new URL('..', import.meta.url))})\n`,
  );
  process.exit(1);
}
const { runHostctl } = await import(entry.href);
process.exit(await runHostctl(process.argv.slice(2)));
