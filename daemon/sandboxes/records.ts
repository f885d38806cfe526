/**
 * The sandboxes domain's records in the store: sublevels `sandboxes` (one
 * record per sandbox, tombstones included), `sandboxes_idem` (idempotency
 * keys: `<token id>/<sha256 of the key>` -> sandbox id) and
 * `sandboxes_intents` (the intent journal of destroys).
 *
 * A sandbox's VM is a VM of the VM service with owner `sandbox` and the
 * label `sandbox_id`; the VM service is the truth about its process and
 * files (running, suspended, stopped), this record about everything else.
 */
import crypto from 'node:crypto';
import { IntentJournal, type JournalOp } from '../lib/journal.js';
import type { Store, Sub } from '../store/store.js';

/** A sandbox's state as the API shows it (context.ts works it out from the record and its VM). */
export type SandboxState = 'booting' | 'running' | 'paused' | 'suspended' | 'stopped' | 'destroying' | 'destroyed' | 'failed';

/**
 * Where the sandbox is in its life. `booting`: the record exists, its VM is
 * being made or started; `ready`: it has booted once (the VM's own state
 * says running, suspended or stopped); `destroying`: a delete is under way;
 * `destroyed`: a tombstone; `failed`: it never came up (no VM is kept).
 */
export type Phase = 'booting' | 'ready' | 'destroying' | 'destroyed' | 'failed';

export interface StartInfo {
  /** `warm`: a resume of a saved warm state on a linked clone; `cold`: a boot from the image's disk. */
  method: 'warm' | 'cold' | null;
  warm_state_id: string | null;
  /** Why a cold boot (no warm state for this image and shape, or the warm resume failed). */
  reason: string | null;
  /** From the create call to running (the guest agent answers). */
  ms: number | null;
  /** Boots begun for this sandbox (a restart of hostd during a boot begins another). */
  attempts: number;
}

export interface SandboxRecord {
  id: string;
  name: string;
  /** Owner: the token id (a revoked and re-created token of the same name is another owner). */
  token_id: string;
  token_name: string;
  image_id: string;
  cpu_cores: number;
  memory_mb: number;
  disk_gb: number;
  labels: Record<string, string>;
  autostart: boolean;
  phase: Phase;
  vmid: number | null;
  start: StartInfo;
  error: string | null;
  /** sha256 of the idempotency key (the key itself is not kept). */
  idempotency: string | null;
  created_at: string;
  running_at: string | null;
  updated_at: string;
  destroyed_at: string | null;
  destroyed_by: string | null;
  /**
   * A fork's origin: the parent sandbox and the warm state its memory and disk
   * were saved to (null until saved). Absent for a sandbox made by a create.
   */
  fork?: { parent: string; warm_state_id: string | null } | null;
}

export type SandboxIntent = { op: 'destroy'; id: string; by: string; at: string };

export const idemHash = (key: string) => crypto.createHash('sha256').update(key).digest('hex');

export class SandboxRecords {
  readonly boxes: Sub<SandboxRecord>;
  readonly idem: Sub<string>;
  readonly intents: Sub<SandboxIntent>;
  readonly journal: IntentJournal<SandboxIntent>;

  constructor(readonly store: Store) {
    this.boxes = store.sub<SandboxRecord>('sandboxes');
    this.idem = store.sub<string>('sandboxes_idem');
    this.intents = store.sub<SandboxIntent>('sandboxes_intents');
    this.journal = new IntentJournal<SandboxIntent>(store, this.intents);
  }

  async get(id: string): Promise<SandboxRecord | undefined> {
    return (await this.boxes.get(id)) ?? undefined;
  }

  async all(): Promise<SandboxRecord[]> {
    return this.boxes.values().all();
  }

  static idemKey(tokenId: string, key: string): string {
    return `${tokenId}/${idemHash(key)}`;
  }

  async byIdempotency(tokenId: string, key: string): Promise<string | undefined> {
    return (await this.idem.get(SandboxRecords.idemKey(tokenId, key))) ?? undefined;
  }

  put(r: SandboxRecord): JournalOp {
    return { type: 'put', sub: this.boxes, key: r.id, value: r };
  }

  del(id: string): JournalOp {
    return { type: 'del', sub: this.boxes, key: id };
  }

  putIdem(tokenId: string, key: string, id: string): JournalOp {
    return { type: 'put', sub: this.idem, key: SandboxRecords.idemKey(tokenId, key), value: id };
  }

  delIdem(tokenId: string, hash: string): JournalOp {
    return { type: 'del', sub: this.idem, key: `${tokenId}/${hash}` };
  }

  intentPut(key: string, i: SandboxIntent): JournalOp {
    return { type: 'put', sub: this.intents, key, value: i };
  }

  async write(ops: JournalOp[]): Promise<void> {
    if (ops.length) await this.store.batch(ops);
  }

  /** Intent key: unique, time-ordered. */
  static intentKey(what: string): string {
    return `${Date.now().toString(36).padStart(10, '0')}-${what}-${crypto.randomBytes(3).toString('hex')}`;
  }
}
