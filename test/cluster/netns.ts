/**
 * The cluster fault tests' lab (test/helpers/netns-hub.ts): one namespace per
 * node. `cut(i)` takes node i's hub-side link down (the node keeps running
 * but nobody can reach it); `restore(i)` brings it back.
 */
import { NetnsHub, ip, type LabHost } from '../helpers/netns-hub.js';

export type LabNode = LabHost;

export class NetLab extends NetnsHub {
  readonly nodes: LabNode[] = [];

  constructor(readonly size: number) {
    super('t', { from: 200, spread: 50 });
  }

  async setup(): Promise<void> {
    await this.building(async () => {
      await this.makeHub();
      for (let i = 0; i < this.size; i++) this.nodes.push(await this.addHost(`n${i + 1}`, i + 1));
      await this.checkRoutes(this.nodes);
    });
  }

  /** Node i can no longer reach or be reached by anyone (its hub-side link is down). */
  async cut(i: number): Promise<void> {
    await ip('-n', this.hub, 'link', 'set', this.nodes[i].hubDev, 'down');
  }

  async restore(i: number): Promise<void> {
    await ip('-n', this.hub, 'link', 'set', this.nodes[i].hubDev, 'up');
  }
}
