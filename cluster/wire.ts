/**
 * The forwarding stream's four messages (CallBatch, CallFrame, ReplyBatch,
 * ReplyFrame in proto/cluster.proto) encoded and decoded by hand: the hot
 * path of every forwarded call, on both members. proto-loader's generic
 * (de)serialisers convert each message with protobufjs's `fromObject` before
 * encoding and `toObject` after decoding, and protobufjs's writer queues one
 * operation object per field before it copies anything; here a batch is
 * measured, then written into one buffer, and read in one pass
 * (docs/performance.md, "Forwarding").
 *
 * The bytes are protobuf's encoding of the same messages, proto3's way
 * (fields at their default value are left out), so a member on an older
 * build, which decodes with proto-loader, reads them as before, and this
 * decoder reads what proto-loader writes: a field it does not know is
 * skipped, a known field sent with another wire type is skipped too, a field
 * left out reads as its default ('', 0, false, an empty Buffer, [] or, for
 * the caller, null). `test/cluster/wire.test.ts` checks both directions
 * against proto-loader.
 */

// The messages, as the rest of the code sees them (proto.ts re-exports them with the others).
export interface WireCaller {
  token_id: string;
  token_name: string;
  scopes: string[];
}
export interface CallFrame {
  id: number;
  operation: string;
  args_json: string;
  caller: WireCaller;
  origin: string;
  request_id: string;
}
export interface CallBatch {
  calls: CallFrame[];
}
export interface ReplyFrame {
  id: number;
  ok: boolean;
  result_json: Buffer;
  status: number;
  error: string;
  more: boolean;
}
export interface ReplyBatch {
  replies: ReplyFrame[];
}

const NO_BYTES = Buffer.alloc(0);
/** Strings up to this many UTF-16 units are measured and copied in JS; longer ones by Buffer's native code. */
const SHORT = 64;

// ------------------------------------------------------------------ sizes

function varintSize(v: number): number {
  return v < 0x80 ? 1 : v < 0x4000 ? 2 : v < 0x200000 ? 3 : v < 0x10000000 ? 4 : 5;
}

/** UTF-8 length of a string (lone surrogates count as U+FFFD, 3 bytes, as Buffer writes them). */
function utf8Size(s: string): number {
  const n = s.length;
  if (n > SHORT) return Buffer.byteLength(s, 'utf8');
  let size = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) size += 1;
    else if (c < 0x800) size += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      size += 4;
      i++;
    } else size += 3;
  }
  return size;
}

/** Size of a length-delimited field (tag of one byte) holding `len` bytes. */
const lenField = (len: number): number => 1 + varintSize(len) + len;

// ------------------------------------------------------------------ writer

class Out {
  pos = 0;
  constructor(readonly buf: Buffer) {}

  byte(b: number): void {
    this.buf[this.pos++] = b;
  }

  varint(v: number): void {
    const buf = this.buf;
    while (v > 0x7f) {
      buf[this.pos++] = (v & 0x7f) | 0x80;
      v >>>= 7;
    }
    buf[this.pos++] = v;
  }

  /** A string of known UTF-8 length `len`. */
  str(s: string, len: number): void {
    const buf = this.buf;
    // As long in UTF-8 as in UTF-16 units: all ASCII.
    if (len > SHORT || len !== s.length) {
      this.pos += buf.write(s, this.pos, len, 'utf8');
      return;
    }
    let p = this.pos;
    for (let i = 0; i < len; i++) buf[p++] = s.charCodeAt(i);
    this.pos = p;
  }
}

// ------------------------------------------------------------------ CallBatch

interface FrameSizes {
  operation: number;
  args: number;
  caller: number;
  tokenId: number;
  tokenName: number;
  scopes: number[];
  origin: number;
  requestId: number;
  /** The frame's encoded length (without its own tag and length). */
  total: number;
}

function callerSize(c: WireCaller, sz: FrameSizes): number {
  sz.tokenId = utf8Size(c.token_id ?? '');
  sz.tokenName = utf8Size(c.token_name ?? '');
  let n = (sz.tokenId ? lenField(sz.tokenId) : 0) + (sz.tokenName ? lenField(sz.tokenName) : 0);
  for (const s of c.scopes ?? []) {
    const l = utf8Size(s);
    sz.scopes.push(l);
    n += lenField(l);
  }
  return n;
}

function frameSizes(f: CallFrame): FrameSizes {
  const sz: FrameSizes = {
    operation: utf8Size(f.operation ?? ''),
    args: utf8Size(f.args_json ?? ''),
    caller: -1,
    tokenId: 0,
    tokenName: 0,
    scopes: [],
    origin: utf8Size(f.origin ?? ''),
    requestId: utf8Size(f.request_id ?? ''),
    total: 0,
  };
  let n = f.id ? 1 + varintSize(f.id >>> 0) : 0;
  if (sz.operation) n += lenField(sz.operation);
  if (sz.args) n += lenField(sz.args);
  if (f.caller) {
    sz.caller = callerSize(f.caller, sz);
    n += lenField(sz.caller);
  }
  if (sz.origin) n += lenField(sz.origin);
  if (sz.requestId) n += lenField(sz.requestId);
  sz.total = n;
  return sz;
}

function writeFrame(o: Out, f: CallFrame, sz: FrameSizes): void {
  if (f.id) {
    o.byte(0x08);
    o.varint(f.id >>> 0);
  }
  if (sz.operation) {
    o.byte(0x12);
    o.varint(sz.operation);
    o.str(f.operation, sz.operation);
  }
  if (sz.args) {
    o.byte(0x1a);
    o.varint(sz.args);
    o.str(f.args_json, sz.args);
  }
  if (sz.caller >= 0) {
    const c = f.caller;
    o.byte(0x22);
    o.varint(sz.caller);
    if (sz.tokenId) {
      o.byte(0x0a);
      o.varint(sz.tokenId);
      o.str(c.token_id, sz.tokenId);
    }
    if (sz.tokenName) {
      o.byte(0x12);
      o.varint(sz.tokenName);
      o.str(c.token_name, sz.tokenName);
    }
    const scopes = c.scopes ?? [];
    for (let i = 0; i < scopes.length; i++) {
      o.byte(0x1a);
      o.varint(sz.scopes[i]);
      o.str(scopes[i], sz.scopes[i]);
    }
  }
  if (sz.origin) {
    o.byte(0x2a);
    o.varint(sz.origin);
    o.str(f.origin, sz.origin);
  }
  if (sz.requestId) {
    o.byte(0x32);
    o.varint(sz.requestId);
    o.str(f.request_id, sz.requestId);
  }
}

export function encodeCallBatch(m: CallBatch): Buffer {
  const calls = m.calls ?? [];
  const sizes = calls.map(frameSizes);
  let total = 0;
  for (const sz of sizes) total += lenField(sz.total);
  const o = new Out(Buffer.allocUnsafe(total));
  for (let i = 0; i < calls.length; i++) {
    o.byte(0x0a);
    o.varint(sizes[i].total);
    writeFrame(o, calls[i], sizes[i]);
  }
  return o.buf;
}

// ------------------------------------------------------------------ ReplyBatch

function replySize(r: ReplyFrame, errLen: number): number {
  let n = r.id ? 1 + varintSize(r.id >>> 0) : 0;
  if (r.ok) n += 2;
  if (r.result_json?.length) n += lenField(r.result_json.length);
  if (r.status) n += 1 + varintSize(r.status >>> 0);
  if (errLen) n += lenField(errLen);
  if (r.more) n += 2;
  return n;
}

export function encodeReplyBatch(m: ReplyBatch): Buffer {
  const replies = m.replies ?? [];
  const errs = replies.map((r) => utf8Size(r.error ?? ''));
  const sizes = replies.map((r, i) => replySize(r, errs[i]));
  let total = 0;
  for (const s of sizes) total += lenField(s);
  const o = new Out(Buffer.allocUnsafe(total));
  for (let i = 0; i < replies.length; i++) {
    const r = replies[i];
    o.byte(0x0a);
    o.varint(sizes[i]);
    if (r.id) {
      o.byte(0x08);
      o.varint(r.id >>> 0);
    }
    if (r.ok) {
      o.byte(0x10);
      o.byte(1);
    }
    if (r.result_json?.length) {
      o.byte(0x1a);
      o.varint(r.result_json.length);
      o.pos += (r.result_json as Buffer).copy(o.buf, o.pos);
    }
    if (r.status) {
      o.byte(0x20);
      o.varint(r.status >>> 0);
    }
    if (errs[i]) {
      o.byte(0x2a);
      o.varint(errs[i]);
      o.str(r.error, errs[i]);
    }
    if (r.more) {
      o.byte(0x30);
      o.byte(1);
    }
  }
  return o.buf;
}

// ------------------------------------------------------------------ reader

class In {
  pos: number;
  constructor(
    readonly buf: Buffer,
    start: number,
    readonly end: number,
  ) {
    this.pos = start;
  }

  /** A varint's low 32 bits, unsigned (what protobuf gives a uint32 or a bool; the rest of a longer one is read and dropped). */
  varint(): number {
    const buf = this.buf;
    let v = 0;
    for (let shift = 0; shift < 70; shift += 7) {
      if (this.pos >= this.end) throw new Error('truncated message');
      const b = buf[this.pos++];
      if (shift < 32) v |= (b & 0x7f) << shift;
      if (b < 0x80) return v >>> 0;
    }
    throw new Error('varint too long');
  }

  /** The bounds of a length-delimited field's contents. */
  len(): number {
    const n = this.varint();
    const start = this.pos;
    if (start + n > this.end) throw new Error('truncated message');
    this.pos = start + n;
    return start;
  }

  str(): string {
    const start = this.len();
    return this.buf.toString('utf8', start, this.pos);
  }

  /** Skips a field of wire type `wt` (one this reader does not know). */
  skip(wt: number): void {
    if (wt === 0) this.varint();
    else if (wt === 1) this.pos += 8;
    else if (wt === 2) this.len();
    else if (wt === 5) this.pos += 4;
    else throw new Error(`wire type ${wt} not supported`);
    if (this.pos > this.end) throw new Error('truncated message');
  }
}

function readCaller(buf: Buffer, start: number, end: number): WireCaller {
  const c: WireCaller = { token_id: '', token_name: '', scopes: [] };
  const r = new In(buf, start, end);
  while (r.pos < end) {
    const tag = r.varint();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (wt === 2 && field === 1) c.token_id = r.str();
    else if (wt === 2 && field === 2) c.token_name = r.str();
    else if (wt === 2 && field === 3) c.scopes.push(r.str());
    else r.skip(wt);
  }
  return c;
}

function readFrame(buf: Buffer, start: number, end: number): CallFrame {
  const f: CallFrame = { id: 0, operation: '', args_json: '', caller: null as unknown as WireCaller, origin: '', request_id: '' };
  const r = new In(buf, start, end);
  while (r.pos < end) {
    const tag = r.varint();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (field === 1 && wt === 0) f.id = r.varint();
    else if (wt !== 2) r.skip(wt);
    else if (field === 2) f.operation = r.str();
    else if (field === 3) f.args_json = r.str();
    else if (field === 4) {
      const s = r.len();
      f.caller = readCaller(buf, s, r.pos);
    } else if (field === 5) f.origin = r.str();
    else if (field === 6) f.request_id = r.str();
    else r.skip(wt);
  }
  return f;
}

/** The messages of a batch's one repeated field (field 1), each read by `read`; other fields skipped. */
function readRepeated<T>(buf: Buffer, read: (buf: Buffer, start: number, end: number) => T): T[] {
  const out: T[] = [];
  const r = new In(buf, 0, buf.length);
  while (r.pos < r.end) {
    const tag = r.varint();
    if (tag === 0x0a) {
      const s = r.len();
      out.push(read(buf, s, r.pos));
    } else r.skip(tag & 7);
  }
  return out;
}

export function decodeCallBatch(buf: Buffer): CallBatch {
  return { calls: readRepeated(buf, readFrame) };
}

function readReply(buf: Buffer, start: number, end: number): ReplyFrame {
  const f: ReplyFrame = { id: 0, ok: false, result_json: NO_BYTES, status: 0, error: '', more: false };
  const r = new In(buf, start, end);
  while (r.pos < end) {
    const tag = r.varint();
    const field = tag >>> 3;
    const wt = tag & 7;
    if (wt === 0) {
      const v = r.varint();
      if (field === 1) f.id = v;
      else if (field === 2) f.ok = v !== 0;
      else if (field === 4) f.status = v;
      else if (field === 6) f.more = v !== 0;
    } else if (wt === 2 && field === 3) {
      const s = r.len();
      // A view of the received message, as protobufjs's reader gives it.
      f.result_json = buf.subarray(s, r.pos);
    } else if (wt === 2 && field === 5) f.error = r.str();
    else r.skip(wt);
  }
  return f;
}

export function decodeReplyBatch(buf: Buffer): ReplyBatch {
  return { replies: readRepeated(buf, readReply) };
}
