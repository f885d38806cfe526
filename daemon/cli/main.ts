/**
 * hostctl's entry: the base commands plus the command groups other modules add.
 */
export { runHostctl, commandGroups } from './hostctl.js';
