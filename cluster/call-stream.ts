/**
 * Forwarded calls over one long-lived bidirectional stream per pair of
 * members (`CallStream` in proto/cluster.proto), instead of one gRPC call per
 * forwarded call: the HTTP/2 stream, the grpc-js call objects and the
 * headers and trailers both ways are paid once per stream, not per call.
 *
 * Origin side (`CallStreamClient`, one per member): every call gets an id, a
 * pending entry and a deadline (one timer per stream, for the earliest); the frames written in one turn of the
 * event loop leave as one `CallBatch` message. Replies come back by id, in
 * any order. When the stream fails (member down, connection cut, member
 * refuses us), every call in flight on it fails with that error, and the next
 * call opens a new stream. A call whose deadline passes fails at once; its
 * late reply, if any, is dropped.
 *
 * Member side (`serveCallStream`): the stream's client certificate is matched
 * to a current member when the stream opens and again for every batch read, so
 * a member removed (or whose certificate changed) is cut at its next frame even
 * if its connection were still open; each frame then goes through the same
 * per-call checks (origin, token directory, scope subset) as any forwarded
 * call, and a refused frame gets its own 403 reply without touching the
 * others. Replies written in one turn leave as one `ReplyBatch`; a long result
 * is split over several frames so that no message comes near the size limit.
 */
import * as grpc from '@grpc/grpc-js';
import type * as W from './proto.js';
import type { Member } from './membership.js';

/** Once a batch holds this many bytes of arguments or results, it is written at once. */
export const BATCH_BYTES = 256 * 1024;
/** The largest piece of one result carried by one ReplyFrame. */
export const CHUNK_BYTES = 256 * 1024;
/** Arguments larger than this are not forwarded (the API's own body limit is 1 MiB). */
export const MAX_ARGS_BYTES = 8 * 1024 * 1024;

/** A failed call, shaped like a grpc-js ServiceError ({code, details}). */
export class RpcFailure extends Error {
  constructor(
    readonly code: grpc.status,
    readonly details: string,
  ) {
    super(`${grpc.status[code]}: ${details}`);
  }
}

export type CallRequest = Omit<W.CallFrame, 'id'>;
type ClientStream = grpc.ClientDuplexStream<W.CallBatch, W.ReplyBatch>;

interface Pending {
  resolve(outcome: W.CallOutcome): void;
  reject(failure: RpcFailure): void;
  /** When the call fails with DEADLINE_EXCEEDED (performance.now() milliseconds). */
  due: number;
  deadlineMs: number;
  chunks: Buffer[] | null;
}

/**
 * One opened CallStream and the calls in flight on it. The calls' deadlines
 * share one timer, armed for the earliest of them: a timer per call (made,
 * then cleared when the answer comes, almost always first) was a measurable
 * part of the origin's work per forwarded call.
 */
class OpenStream {
  readonly pending = new Map<number, Pending>();
  queue: W.CallFrame[] = [];
  bytes = 0;
  scheduled = false;
  failed: RpcFailure | null = null;
  timer: NodeJS.Timeout | null = null;
  /** When the timer fires (performance.now() milliseconds). */
  timerDue = Infinity;
  constructor(readonly call: ClientStream) {}

  /** Arms the timer for a call due at `due` unless it already fires by then. */
  watch(due: number): void {
    if (due >= this.timerDue) return;
    if (this.timer) clearTimeout(this.timer);
    this.timerDue = due;
    this.timer = setTimeout(() => this.expire(), Math.max(0, due - performance.now()));
  }

  /** Fails every call whose deadline has passed, then waits for the next one due. */
  private expire(): void {
    this.timer = null;
    this.timerDue = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const [id, p] of this.pending) {
      if (p.due <= now) {
        this.pending.delete(id);
        p.reject(new RpcFailure(grpc.status.DEADLINE_EXCEEDED, `deadline of ${p.deadlineMs} ms exceeded`));
      } else if (p.due < next) next = p.due;
    }
    if (next !== Infinity) this.watch(next);
  }

  stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.timerDue = Infinity;
  }
}

export class CallStreamClient {
  private current: OpenStream | null = null;
  private nextId = 0;
  private closed = false;

  /** `open` starts a new CallStream on the member's channel (no deadline: it lives as long as it works). */
  constructor(private readonly open: () => ClientStream) {}

  /** Sends one call; resolves with the member's outcome, rejects with an RpcFailure. */
  call(req: CallRequest, deadlineMs: number): Promise<W.CallOutcome> {
    if (this.closed) return Promise.reject(new RpcFailure(grpc.status.CANCELLED, 'client closed'));
    let s: OpenStream;
    try {
      s = this.stream();
    } catch (err) {
      return Promise.reject(new RpcFailure(grpc.status.UNAVAILABLE, (err as Error).message));
    }
    return new Promise<W.CallOutcome>((resolve, reject) => {
      let id = (this.nextId + 1) >>> 0 || 1;
      while (s.pending.has(id)) id = (id + 1) >>> 0 || 1;
      this.nextId = id;
      const due = performance.now() + deadlineMs;
      s.pending.set(id, { resolve, reject, due, deadlineMs, chunks: null });
      s.watch(due);
      s.queue.push({ id, operation: req.operation, args_json: req.args_json, caller: req.caller, origin: req.origin, request_id: req.request_id });
      s.bytes += req.args_json.length;
      if (s.bytes >= BATCH_BYTES) this.flush(s);
      else if (!s.scheduled) {
        s.scheduled = true;
        setImmediate(() => this.flush(s));
      }
    });
  }

  /** Cancels the stream; calls in flight fail. */
  close(): void {
    this.closed = true;
    const s = this.current;
    this.current = null;
    if (s) {
      this.fail(s, new RpcFailure(grpc.status.CANCELLED, 'the connection to this member was closed'));
      s.call.cancel();
    }
  }

  private stream(): OpenStream {
    if (this.current && !this.current.failed) return this.current;
    const s = new OpenStream(this.open());
    this.current = s;
    s.call.on('data', (batch: W.ReplyBatch) => this.onReplies(s, batch));
    s.call.on('error', (err: grpc.ServiceError) => this.fail(s, new RpcFailure(err.code ?? grpc.status.UNAVAILABLE, err.details || err.message)));
    // The member ended the stream without an error (it is shutting down): nothing more will come back.
    s.call.on('status', (st: grpc.StatusObject) =>
      this.fail(
        s,
        st.code === grpc.status.OK ? new RpcFailure(grpc.status.UNAVAILABLE, 'the member closed the call stream') : new RpcFailure(st.code, st.details),
      ),
    );
    s.call.on('end', () => this.fail(s, new RpcFailure(grpc.status.UNAVAILABLE, 'the member closed the call stream')));
    return s;
  }

  private flush(stream: OpenStream): void {
    stream.scheduled = false;
    if (!stream.queue.length || stream.failed) return;
    const calls = stream.queue;
    stream.queue = [];
    stream.bytes = 0;
    stream.call.write({ calls });
  }

  private onReplies(stream: OpenStream, batch: W.ReplyBatch): void {
    for (const r of batch.replies) {
      const p = stream.pending.get(r.id);
      if (!p) continue; // its deadline passed: nobody waits for it any more
      if (r.more) {
        (p.chunks ??= []).push(r.result_json);
        continue;
      }
      stream.pending.delete(r.id);
      const body = p.chunks ? Buffer.concat([...p.chunks, r.result_json]) : r.result_json;
      p.resolve({ ok: r.ok, result_json: body.length ? body.toString('utf8') : '', status: r.status, error: r.error });
    }
  }

  /** The stream is finished: every call in flight on it fails with `err`; the next call opens a new one. */
  private fail(stream: OpenStream, err: RpcFailure): void {
    if (stream.failed) return;
    stream.failed = err;
    if (this.current === stream) this.current = null;
    stream.queue = [];
    stream.stopTimer();
    for (const p of stream.pending.values()) p.reject(err);
    stream.pending.clear();
  }
}

// ---------------------------------------------------------------- member side

export interface CallStreamHost {
  /** The member that owns the stream's certificate now (undefined: no longer a member). */
  current(): Member | undefined;
  /** Runs one frame for that member, with every per-call check. */
  run(frame: W.CallFrame, peer: Member): Promise<W.CallOutcome>;
}

/**
 * Serves one CallStream opened by member `opened`. Every batch read first
 * re-checks that the certificate still belongs to that member; if not, the
 * stream ends with PERMISSION_DENIED and nothing more is run or answered.
 *
 * Replies up to CHUNK_BYTES leave at the end of the turn in which they were
 * ready. A longer result is sent piece by piece, one batch of pieces per
 * completed write, so that it never sits in front of the other replies: a
 * short reply waits behind at most one batch of pieces.
 */
export function serveCallStream(call: grpc.ServerDuplexStream<W.CallBatch, W.ReplyBatch>, opened: Member, host: CallStreamHost): void {
  let queue: W.ReplyFrame[] = [];
  let bytes = 0;
  let scheduled = false;
  /** Long results still being sent, served in turn. */
  const long: Array<{ id: number; outcome: W.CallOutcome; body: Buffer; at: number }> = [];
  let pumping = false;
  /** Calls read whose answer is not completely queued yet. */
  let running = 0;
  let halfClosed = false;
  let done = false;

  const finish = (status?: { code: grpc.status; details: string }): void => {
    if (done) return;
    done = true;
    queue = [];
    long.length = 0;
    if (status)
      call.emit('error', status); // ends the stream with this status
    else call.end();
  };
  const flush = (): void => {
    scheduled = false;
    if (done || !queue.length) return;
    const replies = queue;
    queue = [];
    bytes = 0;
    call.write({ replies });
  };
  const settled = (): void => {
    if (--running === 0 && halfClosed) {
      flush();
      finish();
    }
  };
  const push = (frame: W.ReplyFrame): void => {
    queue.push(frame);
    bytes += frame.result_json.length + frame.error.length;
    if (bytes >= BATCH_BYTES) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
  const pump = (): void => {
    if (done || !long.length) {
      pumping = false;
      return;
    }
    const replies: W.ReplyFrame[] = [];
    let size = 0;
    let completed = 0;
    while (long.length && size < BATCH_BYTES) {
      const l = long.shift()!;
      const end = Math.min(l.at + CHUNK_BYTES, l.body.length);
      const last = end === l.body.length;
      replies.push({
        id: l.id,
        ok: l.outcome.ok,
        result_json: l.body.subarray(l.at, end),
        status: l.outcome.status,
        error: last ? l.outcome.error : '',
        more: !last,
      });
      size += end - l.at;
      l.at = end;
      if (last) completed++;
      else long.push(l);
    }
    call.write({ replies }, () => pump());
    while (completed--) settled();
  };
  const answer = (id: number, outcome: W.CallOutcome): void => {
    if (done) return;
    const body = outcome.ok && outcome.result_json ? Buffer.from(outcome.result_json, 'utf8') : EMPTY;
    if (body.length <= CHUNK_BYTES) {
      push({ id, ok: outcome.ok, result_json: body, status: outcome.status, error: outcome.error, more: false });
      settled();
      return;
    }
    long.push({ id, outcome, body, at: 0 });
    if (!pumping) {
      pumping = true;
      setImmediate(pump);
    }
  };

  call.on('data', (batch: W.CallBatch) => {
    if (done) return;
    const peer = host.current();
    if (!peer || peer.peer_id !== opened.peer_id) {
      finish({ code: grpc.status.PERMISSION_DENIED, details: `member '${opened.peer_id}' is no longer a member of this cluster` });
      return;
    }
    for (const f of batch.calls) {
      running++;
      host.run(f, peer).then(
        (o) => answer(f.id, o),
        (err) => answer(f.id, { ok: false, result_json: '', status: 500, error: (err as Error)?.message ?? String(err) }),
      );
    }
  });
  // The origin closed its side: answer what is running, then close ours.
  call.on('end', () => {
    halfClosed = true;
    if (running === 0) {
      flush();
      finish();
    }
  });
  const stop = (): void => {
    done = true;
    queue = [];
    long.length = 0;
  };
  call.on('cancelled', stop);
  call.on('error', stop);
}

const EMPTY = Buffer.alloc(0);
