import { expect } from 'chai';
import { ToolLists, ALL_TOOLS } from '../../api/mcp/tools.js';
import { operations, ALL_SCOPES } from '../../api/registry/index.js';

describe('MCP tool lists', () => {
  it('offer every MCP operation of the registry to a token with every scope, and only what its scopes reach to the others', () => {
    const lists = new ToolLists();
    const all = lists.forScopes([...ALL_SCOPES]).tools.map((t) => t.name);
    expect(all).to.have.length(ALL_TOOLS.length);
    expect(all).to.have.length(operations.filter((op) => op.mcp).length);
    // Streams and text answers are not tools.
    expect(operations.filter((op) => !op.mcp).map((op) => op.name)).to.include.members(['metrics_get', 'events_stream']);
    const reader = lists.forScopes(['files.read']).tools.map((t) => t.name);
    expect(reader).to.include('folders_list');
    expect(reader).to.not.include('folders_create');
    expect(reader).to.not.include('vms_list');
    // One answer object per scope set, whatever the order the scopes come in.
    expect(lists.forScopes(['vm.read', 'files.read'])).to.equal(lists.forScopes(['files.read', 'vm.read']));
  });
});
