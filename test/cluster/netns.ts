/**
 * A small lab of network namespaces for cluster fault tests: one hub
 * namespace holding a bridge, and one namespace per node joined to it by a
 * veth pair, on a private /24 that exists only inside these namespaces.
 * Nothing here touches the host's own network namespace beyond creating and
 * moving the veth pairs. `cut(i)` takes node i's hub-side link down (the node
 * keeps running but nobody can reach it); `restore(i)` brings it back.
 *
 * Before any test sends traffic, `setup` checks with `ip route get` inside
 * each namespace that every node address is reached over the lab's own link,
 * never a default route.
 */
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import { promisify } from 'node:util';

const run = promisify(execFile);

export async function ip(...args: string[]): Promise<string> {
  const r = await run('ip', args);
  return r.stdout;
}

export interface LabNode {
  ns: string;
  /** Interface inside the node's namespace. */
  dev: string;
  /** Interface on the hub's bridge. */
  hubDev: string;
  addr: string;
}

export class NetLab {
  readonly tag = crypto.randomBytes(3).toString('hex');
  readonly hub = `hdt-${this.tag}-hub`;
  readonly nodes: LabNode[] = [];
  readonly subnet: string;
  private created: string[] = [];

  constructor(readonly size: number) {
    const b = crypto.randomBytes(2);
    this.subnet = `10.${200 + (b[0] % 50)}.${b[1] % 250}`;
  }

  static async available(): Promise<boolean> {
    if (process.getuid?.() !== 0) return false;
    try {
      await ip('netns', 'list');
      return true;
    } catch {
      return false;
    }
  }

  async setup(): Promise<void> {
    try {
      await ip('netns', 'add', this.hub);
      this.created.push(this.hub);
      await ip('-n', this.hub, 'link', 'set', 'lo', 'up');
      await ip('-n', this.hub, 'link', 'add', 'br0', 'type', 'bridge');
      await ip('-n', this.hub, 'link', 'set', 'br0', 'up');
      for (let i = 0; i < this.size; i++) {
        const n: LabNode = { ns: `hdt-${this.tag}-n${i + 1}`, dev: `hv${this.tag}${i + 1}`, hubDev: `hh${this.tag}${i + 1}`, addr: `${this.subnet}.${i + 1}` };
        await ip('netns', 'add', n.ns);
        this.created.push(n.ns);
        await ip('link', 'add', n.dev, 'type', 'veth', 'peer', 'name', n.hubDev);
        await ip('link', 'set', n.dev, 'netns', n.ns);
        await ip('link', 'set', n.hubDev, 'netns', this.hub);
        await ip('-n', this.hub, 'link', 'set', n.hubDev, 'master', 'br0');
        await ip('-n', this.hub, 'link', 'set', n.hubDev, 'up');
        await ip('-n', n.ns, 'link', 'set', 'lo', 'up');
        await ip('-n', n.ns, 'addr', 'add', `${n.addr}/24`, 'dev', n.dev);
        await ip('-n', n.ns, 'link', 'set', n.dev, 'up');
        this.nodes.push(n);
      }
      // Every address must route over the lab's link, inside every namespace.
      for (const from of this.nodes) {
        for (const to of this.nodes) {
          const route = await ip('-n', from.ns, 'route', 'get', to.addr);
          const ok = to === from ? /\blocal\b/.test(route) || route.includes(' dev lo') : route.includes(`dev ${from.dev}`) && !/\bvia\b/.test(route);
          if (!ok) throw new Error(`unexpected route in ${from.ns} to ${to.addr}: ${route.trim()}`);
        }
      }
    } catch (err) {
      await this.cleanup();
      throw err;
    }
  }

  /** Node i can no longer reach or be reached by anyone (its hub-side link is down). */
  async cut(i: number): Promise<void> {
    await ip('-n', this.hub, 'link', 'set', this.nodes[i].hubDev, 'down');
  }

  async restore(i: number): Promise<void> {
    await ip('-n', this.hub, 'link', 'set', this.nodes[i].hubDev, 'up');
  }

  /** Deletes every namespace this lab made (their veth ends go with them). */
  async cleanup(): Promise<void> {
    for (const ns of this.created.reverse()) {
      await ip('netns', 'del', ns).catch(() => undefined);
    }
    this.created = [];
  }
}
