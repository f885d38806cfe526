#!/usr/bin/env node
// `npx hostctl` inside this checkout (node_modules/.bin/hostctl): the same as bin/hostctl.js.
import '../../../bin/hostctl.js';
