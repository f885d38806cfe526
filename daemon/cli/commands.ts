/**
 * Every hostctl command group, one import each: importing a group file
 * registers it (daemon/cli/groups.ts). A domain with operator commands adds
 * its line here.
 */
import './cluster.js';
import './locations.js';
import './apps.js';
import './proxy.js';
import './lxc.js';
import './vms.js';
import './sandboxes.js';
import './events.js';
import './console.js';
