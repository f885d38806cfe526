/** hostctl's command groups (`hostctl cluster ...`, `hostctl lxc ...`): each group file registers itself here. */
import type { AdminClient } from './client.js';

export type Command = (argv: string[], client: AdminClient) => Promise<number>;

export const commandGroups = new Map<string, Command>();

/** Each group's usage text, printed by `hostctl GROUP --help` (a group without one handles --help itself). */
export const groupUsage = new Map<string, string>();
