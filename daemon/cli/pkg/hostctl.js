#!/usr/bin/env node
// Runs the compiled hostctl of the hostd checkout this file lives in.
import { runHostctl } from '../../../dist/daemon/cli/main.js';

runHostctl(process.argv.slice(2)).then((code) => process.exit(code));
