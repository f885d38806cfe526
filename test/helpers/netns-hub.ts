/**
 * Network namespaces for tests: one hub namespace holding a bridge, and one
 * namespace per host joined to it by a veth pair, on a private /24 that
 * exists only inside these namespaces. Nothing here touches the host's own
 * network namespace beyond creating and moving the veth pairs. Before any
 * test sends traffic, the lab checks with `ip route get` inside each
 * namespace that every address is reached over the lab's own link, never a
 * default route. The cluster fault lab and the proxy lab build on it.
 */
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import { promisify } from 'node:util';

const run = promisify(execFile);

export async function ip(...args: string[]): Promise<string> {
  const r = await run('ip', args);
  return r.stdout;
}

export interface LabHost {
  ns: string;
  /** Interface inside the host's namespace. */
  dev: string;
  /** Interface on the hub's bridge. */
  hubDev: string;
  addr: string;
}

export class NetnsHub {
  readonly tag = crypto.randomBytes(3).toString('hex');
  readonly hub: string;
  readonly subnet: string;
  private created: string[] = [];

  /** `prefix` names the lab's namespaces and interfaces; the subnet is 10.<octets.from + random below octets.spread>.<random>. */
  constructor(
    private readonly prefix: string,
    octets: { from: number; spread: number },
  ) {
    this.hub = `hd${prefix}-${this.tag}-hub`;
    const b = crypto.randomBytes(2);
    this.subnet = `10.${octets.from + (b[0] % octets.spread)}.${b[1] % 250}`;
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

  protected async makeHub(): Promise<void> {
    await ip('netns', 'add', this.hub);
    this.created.push(this.hub);
    await ip('-n', this.hub, 'link', 'set', 'lo', 'up');
    await ip('-n', this.hub, 'link', 'add', 'br0', 'type', 'bridge');
    await ip('-n', this.hub, 'link', 'set', 'br0', 'up');
  }

  /** A host namespace `<name>` at `<subnet>.<last>`; `devName` renames its interface inside (the same name in every namespace). */
  protected async addHost(name: string, last: number, devName?: string): Promise<LabHost> {
    const h: LabHost = {
      ns: `hd${this.prefix}-${this.tag}-${name}`,
      dev: `${this.prefix}v${this.tag}${name}`.slice(0, 15),
      hubDev: `${this.prefix}h${this.tag}${name}`.slice(0, 15),
      addr: `${this.subnet}.${last}`,
    };
    await ip('netns', 'add', h.ns);
    this.created.push(h.ns);
    await ip('link', 'add', h.dev, 'type', 'veth', 'peer', 'name', h.hubDev);
    await ip('link', 'set', h.dev, 'netns', h.ns);
    if (devName) {
      await ip('-n', h.ns, 'link', 'set', h.dev, 'name', devName);
      h.dev = devName;
    }
    await ip('link', 'set', h.hubDev, 'netns', this.hub);
    await ip('-n', this.hub, 'link', 'set', h.hubDev, 'master', 'br0');
    await ip('-n', this.hub, 'link', 'set', h.hubDev, 'up');
    await ip('-n', h.ns, 'link', 'set', 'lo', 'up');
    await ip('-n', h.ns, 'addr', 'add', `${h.addr}/24`, 'dev', h.dev);
    await ip('-n', h.ns, 'link', 'set', h.dev, 'up');
    return h;
  }

  /** Every address (the hosts' and `more`) must route over the lab's link, inside every host's namespace. */
  protected async checkRoutes(hosts: LabHost[], more: string[] = []): Promise<void> {
    for (const from of hosts) {
      for (const to of [...hosts.map((h) => h.addr), ...more]) {
        const route = await ip('-n', from.ns, 'route', 'get', to);
        const ok = to === from.addr ? /\blocal\b/.test(route) || route.includes(' dev lo') : route.includes(`dev ${from.dev}`) && !/\bvia\b/.test(route);
        if (!ok) throw new Error(`unexpected route in ${from.ns} to ${to}: ${route.trim()}`);
      }
    }
  }

  /** Runs `build`; on failure deletes what it made and rethrows. */
  protected async building(build: () => Promise<void>): Promise<void> {
    try {
      await build();
    } catch (err) {
      await this.cleanup();
      throw err;
    }
  }

  /** Deletes every namespace this lab made (their veth ends go with them). */
  async cleanup(): Promise<void> {
    for (const ns of this.created.reverse()) await ip('netns', 'del', ns).catch(() => undefined);
    this.created = [];
  }
}
