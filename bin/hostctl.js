#!/usr/bin/env node
// Same as `npx hostctl` (daemon/cli/pkg/hostctl.js), for scripts that call a path.
import "../daemon/cli/pkg/hostctl.js";
