/**
 * Where the cluster's certificates live: <data dir>/cluster/ (mode 0700),
 * keys mode 0600, certificates 0644.
 *
 *   ca.crt    cluster CA certificate (every member)
 *   ca.key    cluster CA key (every member, so any member can admit a node)
 *   node.crt  this node's certificate, signed by the CA
 *   node.key  this node's private key
 */
import fs from 'node:fs';
import path from 'node:path';

export interface NodeCredentials {
  caCertPem: string;
  caKeyPem: string;
  certPem: string;
  keyPem: string;
}

export class ClusterFiles {
  readonly dir: string;

  constructor(dataDir: string) {
    this.dir = path.join(dataDir, 'cluster');
  }

  get caCert(): string {
    return path.join(this.dir, 'ca.crt');
  }
  get caKey(): string {
    return path.join(this.dir, 'ca.key');
  }
  get nodeCert(): string {
    return path.join(this.dir, 'node.crt');
  }
  get nodeKey(): string {
    return path.join(this.dir, 'node.key');
  }

  exists(): boolean {
    return [this.caCert, this.caKey, this.nodeCert, this.nodeKey].every((p) => fs.existsSync(p));
  }

  load(): NodeCredentials | null {
    if (!this.exists()) return null;
    return {
      caCertPem: fs.readFileSync(this.caCert, 'utf8'),
      caKeyPem: fs.readFileSync(this.caKey, 'utf8'),
      certPem: fs.readFileSync(this.nodeCert, 'utf8'),
      keyPem: fs.readFileSync(this.nodeKey, 'utf8'),
    };
  }

  /** Writes all four files; each is written to a temporary name and renamed into place. */
  save(c: NodeCredentials): void {
    fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    fs.chmodSync(this.dir, 0o700);
    writeAtomic(this.caKey, c.caKeyPem, 0o600);
    writeAtomic(this.nodeKey, c.keyPem, 0o600);
    writeAtomic(this.caCert, c.caCertPem, 0o644);
    writeAtomic(this.nodeCert, c.certPem, 0o644);
  }

  /** Removes the certificates (a node removed from its cluster). */
  remove(): void {
    for (const p of [this.caCert, this.caKey, this.nodeCert, this.nodeKey]) {
      try {
        fs.unlinkSync(p);
      } catch {
        /* gone */
      }
    }
  }
}

/**
 * Writes a file so that after a crash or a power loss it holds either the old
 * text or the new, never a torn or empty one: the data is fsynced before the
 * rename, and the directory after it (so that the rename itself is on disk).
 */
function writeAtomic(file: string, text: string, mode: number): void {
  const tmp = `${file}.${process.pid}.tmp`;
  const fd = fs.openSync(tmp, 'w', mode);
  try {
    fs.writeFileSync(fd, text);
    fs.fchmodSync(fd, mode);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  fs.renameSync(tmp, file);
  syncDir(path.dirname(file));
}

function syncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
