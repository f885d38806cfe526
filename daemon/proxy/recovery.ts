/**
 * What a restart after a crash undoes: everything the last run put on the
 * host (open intents, and the Caddy process and floating addresses recorded
 * as this node's). A node that just started serves nothing until the data
 * plane decides it holds the lease, and then claims everything again.
 * Undoing is always safe; finishing could make two nodes answer on the
 * floating address. Undoing is best effort: Caddy and the address guard die
 * with hostd (pdeathsig), so what is left is what they missed.
 */
import { IntentRecovery } from '../lib/recovery.js';
import type { ProxyContext } from './context.js';
import type { FloatingAddresses } from './driver.js';
import type { ProxyIntent } from './records.js';

export function proxyRecovery(ctx: ProxyContext): IntentRecovery<ProxyIntent> {
  const { records, drivers, log } = ctx;
  const undone = { intents: 0, vip: false, caddy: false };
  const remove = (a: FloatingAddresses) =>
    drivers.addresses.remove(a).catch((err) => log.warn({ err, iface: a.iface, cidrs: a.cidrs }, 'could not remove a floating address left by the last run'));
  return new IntentRecovery<ProxyIntent>({
    domain: 'proxy',
    journal: records.journal,
    log,
    describe: (i) => ({ kind: i.kind }),
    async settle(_key, intent) {
      undone.intents++;
      if (intent.kind === 'vip-add' || intent.kind === 'vip-del') {
        await remove({ iface: intent.iface, cidrs: intent.cidrs });
        undone.vip = true;
        return [records.delVip()];
      }
      drivers.caddy.killLeftover(intent.boot, intent.kind === 'caddy-stop' ? intent.pid : null);
      undone.caddy = true;
      return [records.delCaddy()];
    },
    async reconcile() {
      const v = await records.vip();
      if (v) {
        await remove(v);
        await records.state.del('vip');
        undone.vip = true;
      }
      const parked = await records.parked();
      if (parked) {
        await drivers.addresses.dropParked(parked).catch((err) => log.warn({ err, addrs: parked }, 'could not remove a parked floating address'));
        await records.state.del('parked');
        undone.vip = true;
      }
      const c = await records.caddy();
      if (c) {
        drivers.caddy.killLeftover(c.boot, c.pid);
        await records.state.del('caddy');
        undone.caddy = true;
      }
      if (undone.intents || undone.vip || undone.caddy) log.warn(undone, 'proxy: undid what the last run left on the host');
    },
  });
}
