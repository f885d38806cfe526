/** hostctl's command groups (`hostctl cluster ...`, `hostctl lxc ...`): each group file registers itself here. */
import type { AdminClient } from './client.js';

export type Command = (argv: string[], client: AdminClient) => Promise<number>;

export const commandGroups = new Map<string, Command>();
