/**
 * The forwarding stream's hand-written codec (cluster/wire.ts) against
 * proto-loader's generic one on the same .proto, both ways: what this build
 * writes, a member on an older build (proto-loader) reads as the same
 * messages, and what an older build writes, this one reads. Also: fields
 * left out read as their defaults, unknown fields are skipped, non-ASCII and
 * long strings, large ids, a truncated message is refused.
 */
import { expect } from 'chai';
import * as protoLoader from '@grpc/proto-loader';
import { PROTO_PATH } from '../../cluster/proto.js';
import type * as W from '../../cluster/proto.js';
import { decodeCallBatch, decodeReplyBatch, encodeCallBatch, encodeReplyBatch } from '../../cluster/wire.js';

// A fresh load: proto.ts swapped the CallStream (de)serialisers of its own copy for the hand-written ones.
const generic = (
  protoLoader.loadSync(PROTO_PATH, { keepCase: true, longs: Number, enums: String, defaults: true, oneofs: true })[
    'hostd.cluster.v1.Cluster'
  ] as protoLoader.ServiceDefinition
).CallStream;

const frame = (over: Partial<W.CallFrame> = {}): W.CallFrame => ({
  id: 7,
  operation: 'folders_list',
  args_json: '{"storage_id":"default"}',
  caller: { token_id: 't_1', token_name: 'bench', scopes: ['files.read', 'files.manage'] },
  origin: 'n_origin',
  request_id: 'abc-1',
  ...over,
});

const reply = (over: Partial<W.ReplyFrame> = {}): W.ReplyFrame => ({
  id: 7,
  ok: true,
  result_json: Buffer.from('[{"name":"media"}]'),
  status: 200,
  error: '',
  more: false,
  ...over,
});

/** Plain data for comparison: Buffers as text, keys in one order. */
const plain = (v: unknown): unknown =>
  JSON.parse(
    JSON.stringify(v, (_k, x) =>
      x && typeof x === 'object' && !Array.isArray(x) && x.type !== 'Buffer' ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b))) : x,
    ),
  );

const long = 'é✓😀'.repeat(30_000) + 'x'.repeat(70_000);
const calls: W.CallFrame[] = [
  frame(),
  frame({ id: 0xffffffff, operation: 'földers_list', args_json: JSON.stringify({ name: 'médias ✓ 😀' }), request_id: '' }),
  frame({ id: 1, args_json: long, caller: { token_id: '', token_name: '', scopes: [] } }),
  frame({ id: 300, operation: '', args_json: '', origin: '', request_id: 'r'.repeat(200) }),
];
const replies: W.ReplyFrame[] = [
  reply(),
  reply({ id: 0xfffffffe, ok: false, result_json: Buffer.alloc(0), status: 403, error: "token 'bench' lacks scope 'vm.read' ✓" }),
  reply({ id: 2, result_json: Buffer.from(long), more: true }),
  reply({ id: 0, ok: false, result_json: Buffer.alloc(0), status: 0, error: '' }),
];

describe('CallStream codec (cluster/wire.ts)', () => {
  it('proto-loader reads what it writes as the same messages', () => {
    expect(plain(generic.requestDeserialize(encodeCallBatch({ calls })))).to.deep.equal(plain({ calls }));
    expect(plain(generic.responseDeserialize(encodeReplyBatch({ replies })))).to.deep.equal(plain({ replies }));
  });

  it('it reads what proto-loader writes as the same messages', () => {
    expect(plain(decodeCallBatch(generic.requestSerialize({ calls })))).to.deep.equal(plain({ calls }));
    expect(plain(decodeReplyBatch(generic.responseSerialize({ replies })))).to.deep.equal(plain({ replies }));
  });

  it('an empty batch, and fields left out, read as their defaults', () => {
    expect(decodeCallBatch(encodeCallBatch({ calls: [] }))).to.deep.equal({ calls: [] });
    expect(decodeReplyBatch(Buffer.alloc(0))).to.deep.equal({ replies: [] });
    // A frame with no field at all: `0a 00`.
    const [f] = decodeCallBatch(Buffer.from([0x0a, 0x00])).calls;
    expect(f).to.deep.equal({ id: 0, operation: '', args_json: '', caller: null, origin: '', request_id: '' });
    const [r] = decodeReplyBatch(Buffer.from([0x0a, 0x00])).replies;
    expect(r.result_json).to.be.instanceOf(Buffer);
    expect(plain(r)).to.deep.equal(plain({ id: 0, ok: false, result_json: Buffer.alloc(0), status: 0, error: '', more: false }));
  });

  it('skips fields it does not know (a later build may add some)', () => {
    // ReplyFrame{id=5, field 9 varint, field 10 LEN "zz", field 11 fixed64, field 12 fixed32, ok=true}, then a ReplyBatch field 2 LEN.
    const inner = Buffer.from([0x08, 0x05, 0x48, 0x96, 0x01, 0x52, 0x02, 0x7a, 0x7a, 0x59, 1, 2, 3, 4, 5, 6, 7, 8, 0x65, 1, 2, 3, 4, 0x10, 0x01]);
    const msg = Buffer.concat([Buffer.from([0x0a, inner.length]), inner, Buffer.from([0x12, 0x01, 0x00])]);
    const out = decodeReplyBatch(msg);
    expect(out.replies).to.have.length(1);
    expect(out.replies[0]).to.include({ id: 5, ok: true, status: 0, error: '', more: false });
    expect(plain(generic.responseDeserialize(msg))).to.deep.equal(plain(out));
  });

  it('refuses a truncated message', () => {
    const whole = encodeCallBatch({ calls: [frame()] });
    expect(() => decodeCallBatch(whole.subarray(0, whole.length - 3))).to.throw(/truncated/);
    const r = encodeReplyBatch({ replies: [reply()] });
    expect(() => decodeReplyBatch(r.subarray(0, r.length - 1))).to.throw(/truncated/);
  });
});
