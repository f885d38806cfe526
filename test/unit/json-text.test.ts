/**
 * Results as JSON text (api/json-text.ts): the text kept for a result is only
 * ever the text of what the result still is, and the MCP answer built from
 * text is byte for byte the SDK-shaped result serialised.
 */
import { expect } from 'chai';
import { immutable, jsonOf, JsonText, resultValue } from '../../api/json-text.js';
import { toolResult, toolResultJson } from '../../api/mcp/server.js';

const deepFreeze = <T>(v: T): T => {
  if (v && typeof v === 'object') {
    for (const x of Object.values(v)) deepFreeze(x);
    Object.freeze(v);
  }
  return v;
};

describe('results as JSON text', () => {
  it('keeps the text of deeply frozen plain data, and of nothing that could still change', () => {
    const list = deepFreeze({ folders: [{ folder_id: 'f_1', name: 'a "quoted" é \u2028', size: 3, gone: null, ok: true }] });
    expect(immutable(list)).to.equal(true);
    expect(jsonOf(list)).to.equal(JSON.stringify(list));
    expect(jsonOf(list)).to.equal(jsonOf(list));

    // Frozen outside, mutable inside: never kept, so a change inside shows.
    const inner = { name: 'before' };
    const shallow = Object.freeze({ folders: Object.freeze([inner]) });
    expect(immutable(shallow)).to.equal(false);
    expect(jsonOf(shallow)).to.include('before');
    inner.name = 'after';
    expect(jsonOf(shallow)).to.include('after');

    // Not plain data: a getter, a toJSON, a Date, a class instance, a non-finite number.
    const getter = Object.freeze(Object.defineProperty({}, 'n', { get: () => Math.random(), enumerable: true }));
    expect(immutable(getter)).to.equal(false);
    expect(immutable(deepFreeze({ toJSON: () => 'x' }))).to.equal(false);
    expect(immutable(deepFreeze({ at: new Date(0) }))).to.equal(false);
    expect(immutable(deepFreeze(new (class K {})()))).to.equal(false);
    expect(immutable(deepFreeze({ n: Number.NaN }))).to.equal(false);
    // An object kept before it was frozen cannot exist: a mutable one is serialised each time.
    const open = { n: 1 };
    expect(jsonOf(open)).to.equal('{"n":1}');
    open.n = 2;
    expect(jsonOf(open)).to.equal('{"n":2}');
  });

  it('sends a forwarded answer as the text it came as, and gives its value to whoever asks', () => {
    const t = new JsonText('{"folders":[{"name":"x"}]}');
    expect(jsonOf(t)).to.equal(t.text);
    expect(resultValue(t)).to.deep.equal({ folders: [{ name: 'x' }] });
    expect(JSON.stringify({ wrapped: t })).to.equal('{"wrapped":{"folders":[{"name":"x"}]}}');
    expect(resultValue(3)).to.equal(3);
  });

  it('builds the MCP tool result text byte for byte as the serialised SDK-shaped result', () => {
    const values: unknown[] = [
      { folders: [{ name: 'a\\b "c"\n', n: 1.5 }] },
      deepFreeze({ folders: [{ name: 'frozen' }] }),
      [1, 2],
      null,
      undefined,
      'text',
      new JsonText('{"a":"\\u0000 \\"x\\""}'),
      new JsonText('[1,2]'),
    ];
    for (const v of values) {
      const want = JSON.stringify(toolResult(v instanceof JsonText ? v : v));
      expect(toolResultJson(v), String(v)).to.equal(want);
      // Twice: the kept text of a frozen result is the same.
      expect(toolResultJson(v), String(v)).to.equal(want);
    }
  });
});
