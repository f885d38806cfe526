/**
 * The `vms:` section of the config file, validated. Every key is optional.
 *
 *   vms:
 *     default_storage: fast          # pool for new VMs and images (default: the first pool)
 *     network: user                  # default network of new VMs: user (QEMU NAT, SSH on a loopback port),
 *                                    #   bridged (tap on `bridge`), none. Default: bridged when `bridge` is set, else user.
 *     bridge: vmbr0                  # bridge for `bridged` VMs that name none
 *     allowed_bridges: [vmbr1]       # further bridges a VM may name (network_bridge); default none: only `bridge`.
 *                                    #   Widens what vm.manage reaches: a VM on a bridge is on that network.
 *     user_net_restrict: true        # user networking without outbound access (guests reach only the host's forwards).
 *                                    #   false widens what a guest reaches: the internet, and through 10.0.2.2 every
 *                                    #   service listening on the host's loopback (QEMU's slirp maps it to 127.0.0.1).
 *     stop_grace_seconds: 60         # ACPI power-down wait before a hard stop
 *     default_username: user         # cloud-init user when neither the call nor the image names one
 *     default_cpu_cores: 1           # when the image has no minimum
 *     default_memory_mb: 1024
 *     default_disk_gb: 10
 *     vmid_min: 100                  # first automatically assigned VM ID
 *     catalog_file: /etc/hostd/vm-catalog.json   # replaces the bundled download catalog
 *     tcg_tb_size_mb: 256            # TCG translation cache (software emulation only)
 *     template_build_timeout_seconds: 1800
 *     agent_timeout_seconds: 3       # how long one guest agent answer may take before 503
 *     wait_poll_seconds: 5           # wait-ready wakes on the VM's state events; this is how often it looks
 *                                    #   again without one (a safety net); the agent, which has no event, every 250 ms
 *     warm_settle_timeout_seconds: 900   # how long a warm-state save waits for the guest's first boot
 *                                    #   (cloud-init) to finish before it saves (docs/vms.md, "Warm states")
 */
import type { PoolConfig } from '../config.js';

export interface VmSettings {
  defaultStorage: string;
  network: 'user' | 'bridged' | 'none';
  bridge: string | null;
  /** Bridges a VM may join besides `bridge`. */
  allowedBridges: string[];
  userNetRestrict: boolean;
  stopGraceMs: number;
  defaultUsername: string;
  defaultCpuCores: number;
  defaultMemoryMb: number;
  defaultDiskGb: number;
  vmidMin: number;
  catalogFile: string | null;
  tcgTbSizeMb: number | undefined;
  templateBuildTimeoutMs: number;
  agentTimeoutMs: number;
  waitPollMs: number;
  warmSettleTimeoutMs: number;
}

const KEYS = [
  'default_storage',
  'network',
  'bridge',
  'allowed_bridges',
  'user_net_restrict',
  'stop_grace_seconds',
  'default_username',
  'default_cpu_cores',
  'default_memory_mb',
  'default_disk_gb',
  'vmid_min',
  'catalog_file',
  'tcg_tb_size_mb',
  'template_build_timeout_seconds',
  'agent_timeout_seconds',
  'wait_poll_seconds',
  'warm_settle_timeout_seconds',
];

export const BRIDGE_NAME = /^[A-Za-z0-9_.-]{1,15}$/;

/** A Linux interface name: BRIDGE_NAME, and not `.` or `..` (the kernel refuses those). */
export const validBridgeName = (name: string): boolean => BRIDGE_NAME.test(name) && name !== '.' && name !== '..';

export function parseVmSettings(raw: unknown, pools: PoolConfig[]): VmSettings {
  const s = (raw ?? {}) as Record<string, unknown>;
  if (typeof s !== 'object' || Array.isArray(s)) throw new Error('config: vms must be a mapping');
  for (const k of Object.keys(s)) if (!KEYS.includes(k)) throw new Error(`config: vms.${k} is not a known setting (known: ${KEYS.join(', ')})`);
  const int = (k: string, def: number, min: number, max: number): number => {
    const v = s[k];
    if (v === undefined || v === null) return def;
    if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) throw new Error(`config: vms.${k} must be an integer ${min}-${max}`);
    return v;
  };
  const str = (k: string): string | null => {
    const v = s[k];
    if (v === undefined || v === null) return null;
    if (typeof v !== 'string' || !v) throw new Error(`config: vms.${k} must be a non-empty string`);
    return v;
  };
  const defaultStorage = str('default_storage') ?? pools[0]?.id;
  if (!defaultStorage || !pools.some((p) => p.id === defaultStorage)) throw new Error(`config: vms.default_storage '${defaultStorage}' is not a storage pool`);
  const bridge = str('bridge');
  if (bridge && !validBridgeName(bridge)) throw new Error('config: vms.bridge must be 1-15 of [A-Za-z0-9_.-]');
  const allowed = s.allowed_bridges ?? [];
  if (!Array.isArray(allowed) || allowed.some((b) => typeof b !== 'string' || !validBridgeName(b))) {
    throw new Error('config: vms.allowed_bridges must be a list of bridge names (1-15 of [A-Za-z0-9_.-])');
  }
  const network = (str('network') ?? (bridge ? 'bridged' : 'user')) as VmSettings['network'];
  if (!['user', 'bridged', 'none'].includes(network)) throw new Error('config: vms.network must be user, bridged or none');
  if (network === 'bridged' && !bridge) throw new Error('config: vms.network bridged needs vms.bridge');
  const restrict = s.user_net_restrict;
  if (restrict !== undefined && restrict !== null && typeof restrict !== 'boolean') throw new Error('config: vms.user_net_restrict must be true or false');
  const username = str('default_username') ?? 'user';
  if (!USERNAME.test(username)) throw new Error('config: vms.default_username is not a valid user name');
  const tb = s.tcg_tb_size_mb === undefined || s.tcg_tb_size_mb === null ? undefined : int('tcg_tb_size_mb', 0, 16, 65536);
  return {
    defaultStorage,
    network,
    bridge,
    allowedBridges: [...new Set([...(bridge ? [bridge] : []), ...(allowed as string[])])],
    // Restricted unless the operator turns it off: an unrestricted guest reaches the host's loopback.
    userNetRestrict: restrict !== false,
    stopGraceMs: int('stop_grace_seconds', 60, 0, 3600) * 1000,
    defaultUsername: username,
    defaultCpuCores: int('default_cpu_cores', 1, 1, 1024),
    defaultMemoryMb: int('default_memory_mb', 1024, 64, 16 * 1024 * 1024),
    defaultDiskGb: int('default_disk_gb', 10, 1, 65536),
    vmidMin: int('vmid_min', 100, 1, 999_999_999),
    catalogFile: str('catalog_file'),
    tcgTbSizeMb: tb,
    templateBuildTimeoutMs: int('template_build_timeout_seconds', 1800, 10, 86400) * 1000,
    agentTimeoutMs: int('agent_timeout_seconds', 3, 1, 600) * 1000,
    waitPollMs: int('wait_poll_seconds', 5, 1, 86400) * 1000,
    warmSettleTimeoutMs: int('warm_settle_timeout_seconds', 900, 1, 86400) * 1000,
  };
}

/** Linux user names cloud-init can create. */
export const USERNAME = /^[a-z_][a-z0-9_-]{0,31}$/;
