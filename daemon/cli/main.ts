/**
 * hostctl's entry: the base commands plus the command groups other modules add.
 */
import './cluster.js';
import './vms.js';

export { runHostctl, commandGroups } from './hostctl.js';
