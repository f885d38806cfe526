/**
 * One rule for the output of a command run in a guest (VM, LXC container,
 * sandbox): each stream keeps at most EXEC_STREAM_CAP_BYTES, the rest is
 * counted and dropped as it arrives (the daemon's memory stays bounded while a
 * command floods), and `truncated` says that something was cut.
 */

/** Bytes kept per stream (stdout and stderr each): 1 MiB. */
export const EXEC_STREAM_CAP_BYTES = 1024 * 1024;

/** What every exec answers, whatever the runtime. */
export interface ExecResult {
  /** null when the command was killed at the deadline. */
  exit_code: number | null;
  stdout: string;
  stderr: string;
  /** True when stdout or stderr was longer than EXEC_STREAM_CAP_BYTES and was cut. */
  truncated: boolean;
  timed_out: boolean;
  duration_ms: number;
}

/** Keeps the first `cap` bytes of a stream and counts the rest. */
export class BoundedOutput {
  private readonly chunks: Buffer[] = [];
  private kept = 0;
  /** Every byte the stream produced, kept or not. */
  seen = 0;

  constructor(readonly cap = EXEC_STREAM_CAP_BYTES) {}

  push(chunk: Buffer | Uint8Array | string): void {
    const b = typeof chunk === 'string' ? Buffer.from(chunk, 'utf8') : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    this.seen += b.length;
    if (this.kept >= this.cap) return;
    const take = b.length <= this.cap - this.kept ? b : b.subarray(0, this.cap - this.kept);
    // A copy: the caller's buffer may be reused (streams, pooled reads).
    this.chunks.push(Buffer.from(take));
    this.kept += take.length;
  }

  get truncated(): boolean {
    return this.seen > this.kept;
  }

  /** The kept bytes. */
  bytes(): Buffer {
    return Buffer.concat(this.chunks, this.kept);
  }

  /** The kept bytes as UTF-8; a character cut in two by the cap is left out rather than mangled. */
  text(): string {
    const b = this.bytes();
    return (this.truncated ? b.subarray(0, utf8Boundary(b)) : b).toString('utf8');
  }
}

/** The largest length <= b.length that does not end inside a UTF-8 sequence. */
export function utf8Boundary(b: Buffer): number {
  const i = b.length;
  // Step back over continuation bytes (10xxxxxx), at most 3.
  let back = 0;
  while (i - back - 1 >= 0 && back < 3 && (b[i - back - 1] & 0xc0) === 0x80) back++;
  const lead = i - back - 1;
  if (lead < 0) return i;
  const c = b[lead];
  const need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
  return need > back + 1 ? lead : i;
}
