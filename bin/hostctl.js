#!/usr/bin/env node
import { runHostctl } from '../dist/daemon/cli/main.js';

runHostctl(process.argv.slice(2)).then((code) => process.exit(code));
