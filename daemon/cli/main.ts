/**
 * hostctl's entry: the base commands plus the command groups other modules add.
 */
import './cluster.js';
import './locations.js';
import './apps.js';
import './proxy.js';

export { runHostctl, commandGroups } from './hostctl.js';
