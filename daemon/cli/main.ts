/**
 * hostctl's entry (bin/hostctl.js imports it): the base commands and every
 * command group. `node dist/daemon/cli/main.js ...` is hostctl too.
 */
import { isEntryPoint, runHostctl } from './hostctl.js';

export { runHostctl };

if (isEntryPoint(import.meta.url)) void runHostctl(process.argv.slice(2)).then((code) => process.exit(code));
