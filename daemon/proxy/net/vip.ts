/**
 * Floating addresses on the holder's interface, with iproute2 and iputils
 * arping.
 *
 * Claiming (IPv4): a duplicate-address probe first (`arping -D`: any host that
 * still answers for the address wins, and we do not add it), then `ip addr
 * add`, then gratuitous ARP (`arping -U`, once now and once a second later)
 * so that clients and switches move to this node's MAC at once.
 * IPv6: the kernel's own duplicate address detection runs on `ip addr add`,
 * and with `ndisc_notify` set on the interface it sends the unsolicited
 * neighbour advertisement when DAD completes (about a second later).
 *
 * A guard process (`setpriv --pdeathsig TERM`, a fixed shell script taking
 * the interface and addresses as positional arguments) removes the addresses
 * when hostd dies, so that a crashed hostd never keeps answering on them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import { availableAs, missing, type Availability } from '../../lib/availability.js';
import { ProgramError, run, which } from '../../lib/run.js';
import { conflict } from '../../lib/errors.js';
import type { FloatingAddresses } from '../driver.js';

export async function probeVip(): Promise<Availability[]> {
  const ip = (await which('ip')) ? availableAs('ip', null) : missing('ip', 'ip is not installed (apt-get install iproute2)');
  let arping: Availability;
  if (await which('arping')) {
    try {
      const r = await run('arping', ['-V'], { timeoutMs: 5000, okCodes: [0, 1, 2] });
      const m = /iputils[ -](\S+)/.exec(r.stdout + r.stderr);
      arping = m ? availableAs('arping', m[1]) : missing('arping', 'arping is not the iputils one (apt-get install iputils-arping)');
    } catch (err) {
      arping = missing('arping', (err as Error).message);
    }
  } else arping = missing('arping', 'arping is not installed (apt-get install iputils-arping)');
  return [ip, arping];
}

/** The address of `addr/prefix`. */
const addrOf = (cidr: string): string => cidr.split('/')[0];

/** Addresses on `iface` as `addr/prefix` (with the IPv6 DAD state flags). */
export async function addressesOn(iface: string): Promise<Array<{ cidr: string; family: string; dadfailed: boolean; tentative: boolean }>> {
  const r = await run('ip', ['-j', 'addr', 'show', 'dev', iface], { timeoutMs: 5000, install: 'iproute2' });
  const links = JSON.parse(r.stdout || '[]') as Array<{
    addr_info?: Array<{ local: string; prefixlen: number; family: string; dadfailed?: boolean; tentative?: boolean }>;
  }>;
  return links.flatMap((l) =>
    (l.addr_info ?? []).map((a) => ({ cidr: `${a.local}/${a.prefixlen}`, family: a.family, dadfailed: !!a.dadfailed, tentative: !!a.tentative })),
  );
}

/** Whether `iface` exists. */
export async function ifaceExists(iface: string): Promise<boolean> {
  try {
    await run('ip', ['link', 'show', 'dev', iface], { timeoutMs: 5000 });
    return true;
  } catch (err) {
    if (err instanceof ProgramError) return false;
    throw err;
  }
}

/** Who answers ARP for `addr` on `iface` right now (a MAC), or null: a 200 ms duplicate-address probe. */
export async function arpOwner(iface: string, addr: string): Promise<string | null> {
  // iputils arping takes whole seconds only: `timeout -s INT` ends the probe early, and
  // arping's INT handler still exits 0 (nobody answered) or 1 (somebody did).
  const r = await run('timeout', ['--preserve-status', '-s', 'INT', '0.2', 'arping', '-D', '-c', '1', '-w', '1', '-I', iface, addr], {
    timeoutMs: 5000,
    okCodes: [0, 1],
  });
  if (r.code === 0) return null;
  const m = /\[([0-9A-Fa-f:]{17})\]/.exec(r.stdout);
  return m ? m[1].toLowerCase() : 'unknown';
}

async function garp(iface: string, addr: string): Promise<void> {
  await run('timeout', ['--preserve-status', '-s', 'INT', '0.1', 'arping', '-U', '-c', '1', '-w', '1', '-I', iface, addr], {
    timeoutMs: 5000,
    okCodes: [0, 1],
  });
}

async function del(iface: string, cidr: string): Promise<void> {
  try {
    await run('ip', ['addr', 'del', cidr, 'dev', iface], { timeoutMs: 5000 });
  } catch (err) {
    // Not there (or the interface is gone): nothing to remove.
    if (err instanceof ProgramError && /Cannot assign requested address|Address not found|Cannot find device|does not exist/.test(err.stderr)) return;
    throw err;
  }
}

/** Removes the floating addresses (idempotent). */
export async function releaseVip(a: FloatingAddresses): Promise<void> {
  for (const c of a.cidrs) await del(a.iface, c);
}

/**
 * Adds the floating addresses and announces them. 409 when another host
 * answers for an IPv4 address (the previous holder has not let go yet).
 */
export async function claimVip(a: FloatingAddresses): Promise<void> {
  const { iface } = a;
  const v4 = a.cidrs.filter((c) => !c.includes(':'));
  const v6 = a.cidrs.filter((c) => c.includes(':'));
  // Answer ARP on this interface only for its own addresses, so that an address parked on lo
  // (handoff below) is silent there; and never use the floating address as an ARP source.
  writeSysctl(`ipv4/conf/${iface}/arp_ignore`, '1');
  writeSysctl(`ipv4/conf/${iface}/arp_announce`, '2');
  await dropParked(v4.map(addrOf));
  const have = new Set((await addressesOn(iface)).map((x) => x.cidr));
  for (const c of v4) {
    const addr = addrOf(c);
    if (!have.has(c)) {
      const owner = await arpOwner(iface, addr);
      if (owner) throw conflict(`floating address ${addr} is still answered by ${owner} on ${iface}`);
      await run('ip', ['addr', 'add', c, 'dev', iface], { timeoutMs: 5000, install: 'iproute2' });
    }
    await garp(iface, addr);
    // A second announcement for switches and hosts that missed the first.
    setTimeout(() => void garp(iface, addr).catch(() => undefined), 1000).unref();
  }
  for (const c of v6) {
    if (have.has(c)) continue;
    try {
      fs.writeFileSync(`/proc/sys/net/ipv6/conf/${iface}/ndisc_notify`, '1');
    } catch {
      /* no IPv6 on this interface: the add below says so */
    }
    await run('ip', ['-6', 'addr', 'add', c, 'dev', iface], { timeoutMs: 5000 });
  }
}

function writeSysctl(key: string, value: string): void {
  try {
    fs.writeFileSync(`/proc/sys/net/${key}`, value);
  } catch {
    /* not there (no such interface or family): the address commands say so */
  }
}

/** `a.b.c.d` of each IPv4 `a.b.c.d/n` (IPv6 is never parked). */
export const parkable = (cidrs: string[]): string[] => cidrs.filter((c) => !c.includes(':')).map(addrOf);

/**
 * Hands the addresses off: each IPv4 address is parked on lo (/32) before it
 * leaves the interface. With arp_ignore=1 on the interface the parked address
 * answers no ARP, so the next holder's probe finds it free; clients whose ARP
 * cache still points here get a TCP reset at once (nothing listens: Caddy's
 * servers are gone first) instead of a lost SYN and a one-second retransmit.
 * `dropParked` removes the parked copies a few seconds later.
 */
export async function handoffVip(iface: string, cidrs: string[]): Promise<string[]> {
  const parked = parkable(cidrs);
  for (const a of parked) {
    try {
      await run('ip', ['addr', 'add', `${a}/32`, 'dev', 'lo'], { timeoutMs: 5000 });
    } catch (err) {
      if (!(err instanceof ProgramError && /File exists/.test(err.stderr))) throw err;
    }
  }
  for (const c of cidrs) await del(iface, c);
  return parked;
}

export async function dropParked(addrs: string[]): Promise<void> {
  for (const a of addrs) await del('lo', `${a}/32`);
}

// The parent-death signal can arrive more than once (seen under `ip netns exec`): the first
// thing the handler does is ignore further signals, so a second one cannot cut the hand-off short.
const GUARD =
  'cleanup() { trap "" TERM INT HUP; kill "$pid" 2>/dev/null; iface="$1"; hold="$2"; shift 2;\n' +
  '  for a in "$@"; do case "$a" in *:*) ;; *) ip addr add "${a%/*}/32" dev lo 2>/dev/null;; esac; ip addr del "$a" dev "$iface" 2>/dev/null; done;\n' +
  '  sleep "$hold"; for a in "$@"; do case "$a" in *:*) ;; *) ip addr del "${a%/*}/32" dev lo 2>/dev/null;; esac; done; exit 0; }\n' +
  'trap \'cleanup "$@"\' TERM INT HUP\n' +
  'trap \'kill "$pid" 2>/dev/null; exit 0\' USR1\n' +
  'while :; do sleep 3600 & pid=$!; wait "$pid"; done\n';

/** The guard that hands `cidrs` off (parked on lo for `holdSeconds`, then gone) when hostd dies. */
export function startGuard(iface: string, cidrs: string[], holdSeconds: number): ChildProcess {
  const child = spawn('setpriv', ['--pdeathsig', 'TERM', '--', 'sh', '-c', GUARD, 'hostd-vip-guard', iface, String(holdSeconds), ...cidrs], {
    stdio: 'ignore',
  });
  child.on('error', () => undefined);
  return child;
}
