/**
 * The secret store: small secrets (share passwords, DNS provider keys, cloud-init
 * passwords) encrypted at rest with AES-256-GCM under a key that only hostd
 * reads (`<data dir>/secrets.key`, mode 0600). Each secret is one file
 * `<data dir>/secrets/<namespace>/<name>` written atomically (temporary file,
 * fsync, rename), so a crash leaves the old value or the new, never half of
 * one. The plaintext never touches the disk, a log line or an error message.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

const KEY_BYTES = 32;
const IV_BYTES = 12;
const VERSION = 1;
const NAME = /^[A-Za-z0-9_.@-]{1,128}$/;

export interface SecretStore {
  put(namespace: string, name: string, value: string): Promise<void>;
  /** The plaintext, or null when no such secret is stored. */
  get(namespace: string, name: string): Promise<string | null>;
  has(namespace: string, name: string): Promise<boolean>;
  /** Removes it (no error when it is not there). */
  delete(namespace: string, name: string): Promise<void>;
  /** Names stored in a namespace. */
  list(namespace: string): Promise<string[]>;
}

function checkName(what: string, v: string): void {
  if (!NAME.test(v) || v === '.' || v === '..') throw new Error(`secret ${what} '${v.slice(0, 40)}' is not 1-128 of [A-Za-z0-9_.@-]`);
}

export class FileSecretStore implements SecretStore {
  private key: Buffer | null = null;
  private readonly root: string;
  private readonly keyPath: string;

  constructor(dataDir: string) {
    this.root = path.join(dataDir, 'secrets');
    this.keyPath = path.join(dataDir, 'secrets.key');
  }

  private loadKey(): Buffer {
    if (this.key) return this.key;
    fs.mkdirSync(path.dirname(this.keyPath), { recursive: true, mode: 0o700 });
    try {
      const k = fs.readFileSync(this.keyPath);
      if (k.length !== KEY_BYTES) throw new Error(`${this.keyPath} is not a ${KEY_BYTES}-byte key`);
      this.key = k;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      const k = crypto.randomBytes(KEY_BYTES);
      const tmp = `${this.keyPath}.${process.pid}.tmp`;
      const fd = fs.openSync(tmp, 'wx', 0o600);
      try {
        fs.writeSync(fd, k);
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
      try {
        fs.linkSync(tmp, this.keyPath); // fails if another writer won: use theirs
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      } finally {
        fs.unlinkSync(tmp);
      }
      this.key = fs.readFileSync(this.keyPath);
    }
    return this.key;
  }

  private file(namespace: string, name: string): string {
    checkName('namespace', namespace);
    checkName('name', name);
    return path.join(this.root, namespace, name);
  }

  async put(namespace: string, name: string, value: string): Promise<void> {
    const file = this.file(namespace, name);
    const iv = crypto.randomBytes(IV_BYTES);
    const cipher = crypto.createCipheriv('aes-256-gcm', this.loadKey(), iv);
    cipher.setAAD(Buffer.from(`${namespace}/${name}`));
    const body = Buffer.concat([cipher.update(value, 'utf8'), cipher.final()]);
    const blob = Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), body]);
    await fs.promises.mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
    const tmp = `${file}.${process.pid}.${crypto.randomBytes(4).toString('hex')}.tmp`;
    const fh = await fs.promises.open(tmp, 'wx', 0o600);
    try {
      await fh.writeFile(blob);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await fs.promises.rename(tmp, file);
  }

  async get(namespace: string, name: string): Promise<string | null> {
    let blob: Buffer;
    try {
      blob = await fs.promises.readFile(this.file(namespace, name));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw err;
    }
    if (blob[0] !== VERSION || blob.length < 1 + IV_BYTES + 16) throw new Error(`secret ${namespace}/${name} is not readable (unknown format)`);
    const iv = blob.subarray(1, 1 + IV_BYTES);
    const tag = blob.subarray(1 + IV_BYTES, 1 + IV_BYTES + 16);
    const decipher = crypto.createDecipheriv('aes-256-gcm', this.loadKey(), iv);
    decipher.setAAD(Buffer.from(`${namespace}/${name}`));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(blob.subarray(1 + IV_BYTES + 16)), decipher.final()]).toString('utf8');
    } catch {
      throw new Error(`secret ${namespace}/${name} does not decrypt with this data dir's key`);
    }
  }

  async has(namespace: string, name: string): Promise<boolean> {
    try {
      await fs.promises.access(this.file(namespace, name));
      return true;
    } catch {
      return false;
    }
  }

  async delete(namespace: string, name: string): Promise<void> {
    await fs.promises.rm(this.file(namespace, name), { force: true });
  }

  async list(namespace: string): Promise<string[]> {
    checkName('namespace', namespace);
    try {
      return (await fs.promises.readdir(path.join(this.root, namespace))).filter((n) => !n.endsWith('.tmp')).sort();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
      throw err;
    }
  }
}
