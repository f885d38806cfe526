/**
 * hostctl's entry: the base commands plus the command groups other modules add.
 */
import './cluster.js';
import './locations.js';
import './apps.js';
import './proxy.js';
import './lxc.js';

export { runHostctl, commandGroups } from './hostctl.js';

// `node dist/daemon/cli/main.js ...` is hostctl too (imports are hoisted: every command group above is registered first).
import { isEntryPoint, runHostctl as run } from './hostctl.js';

if (isEntryPoint(import.meta.url)) void run(process.argv.slice(2)).then((code) => process.exit(code));
