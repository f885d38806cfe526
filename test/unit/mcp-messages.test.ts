import { expect } from 'chai';
import { JSONRPCMessageSchema } from '@modelcontextprotocol/sdk/types.js';
import { isPlainRequest } from '../../api/mcp/server.js';

describe('MCP messages checked by hand', () => {
  it('what the hand check passes, the SDK schema accepts unchanged; everything else is left to the schema', () => {
    const passes = [
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'folders_list', arguments: {} } },
      { jsonrpc: '2.0', id: 'a-1', method: 'tools/call', params: { name: 'folders_get', arguments: { folder_id: 'f_x', deep: { a: [1] } } } },
      { jsonrpc: '2.0', id: 0, method: 'tools/list' },
      { jsonrpc: '2.0', id: -7, method: 'tools/call', params: { name: 'folders_list' } },
    ];
    for (const m of passes) {
      expect(isPlainRequest(m), JSON.stringify(m)).to.equal(true);
      expect(JSONRPCMessageSchema.parse(m), JSON.stringify(m)).to.deep.equal(m);
    }
    const left = [
      null,
      [],
      [{ jsonrpc: '2.0', id: 1, method: 'tools/list' }],
      { jsonrpc: '1.0', id: 1, method: 'tools/list' },
      { jsonrpc: '2.0', id: 1.5, method: 'tools/list' },
      { jsonrpc: '2.0', id: 2 ** 60, method: 'tools/list' },
      { jsonrpc: '2.0', id: null, method: 'tools/list' },
      { jsonrpc: '2.0', method: 'notifications/initialized' },
      { jsonrpc: '2.0', id: 1, method: 7 },
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'x', arguments: {}, _meta: { progressToken: 1 } } },
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: [] },
      { jsonrpc: '2.0', id: 1, method: 'tools/list', extra: true },
      { jsonrpc: '2.0', id: 1, result: {} },
      JSON.parse('{"jsonrpc":"2.0","id":1,"method":"tools/list","__proto__":{}}'),
    ];
    for (const m of left) expect(isPlainRequest(m), JSON.stringify(m)).to.equal(false);
  });
});
