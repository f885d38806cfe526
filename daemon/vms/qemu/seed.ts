/**
 * The cloud-init NoCloud seed of a VM: user-data, meta-data and
 * network-config rendered from the stored settings (pure), written as an ISO
 * 9660 image labelled `cidata` that the VM sees as a CD-ROM.
 *
 * hostd re-keys clones itself (before first boot, see identity.ts), so the
 * user-data tells cloud-init not to delete SSH host keys: `skip_rekey` would
 * mean nothing otherwise. The password arrives here already hashed.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import YAML from 'yaml';
import { run } from '../../lib/run.js';
import type { CloudInitSettings, SeedFiles, SeedInput } from '../driver.js';

export type { CloudInitSettings, SeedFiles, SeedInput };

export function renderSeed(s: SeedInput): SeedFiles {
  const c = s.settings;
  const user: Record<string, unknown> = {
    name: c.username,
    shell: '/bin/bash',
    sudo: 'ALL=(ALL) NOPASSWD:ALL',
    lock_passwd: s.passwordHash === null,
  };
  if (s.passwordHash) user.passwd = s.passwordHash;
  if (c.ssh_public_key) user.ssh_authorized_keys = [c.ssh_public_key];
  const cfg: Record<string, unknown> = {
    hostname: s.hostname,
    manage_etc_hosts: true,
    ssh_deletekeys: false,
    users: [user],
    ssh_pwauth: c.ssh_password_auth,
    package_upgrade: c.package_upgrade,
  };
  const runcmd: string[][] = [];
  if (!c.ssh_enabled) runcmd.push(['systemctl', 'disable', '--now', 'ssh']);
  if (runcmd.length) cfg.runcmd = runcmd;
  // base64: the seed is any text, and cloud-init's YAML 1.1 loader takes characters such as U+2028
  // for line breaks that would let a seed end its block and add keys of its own.
  if (s.seedFallback != null) {
    cfg.write_files = [
      { path: '/etc/svc/seed', encoding: 'b64', content: Buffer.from(s.seedFallback, 'utf8').toString('base64'), permissions: '0600', owner: 'root:root' },
    ];
  }
  const files: SeedFiles = {
    'user-data': '#cloud-config\n' + YAML.stringify(cfg),
    'meta-data': YAML.stringify({ 'instance-id': s.instanceId, 'local-hostname': s.hostname }),
  };
  if (s.mac && c.network_type !== 'none') {
    const eth: Record<string, unknown> = { match: { macaddress: s.mac } };
    if (c.ip_address) {
      eth.addresses = [c.ip_address];
      if (c.gateway) eth.routes = [{ to: c.gateway.includes(':') ? '::/0' : '0.0.0.0/0', via: c.gateway }];
    } else {
      eth.dhcp4 = true;
    }
    if (c.dns_servers.length) eth.nameservers = { addresses: c.dns_servers };
    files['network-config'] = YAML.stringify({ version: 2, ethernets: { nic0: eth } });
  }
  return files;
}

/** Writes the seed ISO atomically (a running VM keeps the old one open until its next start). */
export async function writeSeedIso(file: string, files: SeedFiles): Promise<void> {
  const dir = `${file}.d`;
  await fs.rm(dir, { recursive: true, force: true });
  await fs.mkdir(dir, { recursive: true, mode: 0o700 });
  try {
    const names: string[] = [];
    for (const [name, text] of Object.entries(files)) {
      if (text === undefined) continue;
      await fs.writeFile(path.join(dir, name), text, { mode: 0o600 });
      names.push(name);
    }
    const tmp = `${file}.tmp`;
    await run('genisoimage', ['-quiet', '-output', tmp, '-volid', 'cidata', '-joliet', '-rock', ...names.map((n) => path.join(dir, n))], {
      install: 'the genisoimage package',
      timeoutMs: 30_000,
    });
    await fs.chmod(tmp, 0o600);
    await fs.rename(tmp, file);
  } finally {
    await fs.rm(dir, { recursive: true, force: true });
  }
}

/** SHA-512 crypt of a password; the password goes through stdin, never the argument list. */
export async function hashPassword(password: string): Promise<string> {
  const r = await run('openssl', ['passwd', '-6', '-stdin'], { input: password + '\n', install: 'the openssl package', timeoutMs: 10_000 });
  const h = r.stdout.trim();
  if (!h.startsWith('$6$')) throw new Error('openssl passwd gave no SHA-512 hash');
  return h;
}
