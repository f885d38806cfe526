import { expect } from 'chai';
import { ToolLists, ALL_TOOLS } from '../../api/mcp/tools.js';
import { operations, ALL_SCOPES } from '../../api/registry/index.js';
import { isBuilt, notBuiltHandler } from '../../daemon/lib/caller.js';
import { ApiError, notImplemented } from '../../daemon/lib/errors.js';

// Every domain is built now, so a daemon has no 501 left to show; the rule for
// a domain that lands later is held here, on the pieces the transports use.
describe('operations a build does not serve', () => {
  it('are not offered as MCP tools, whatever the scopes', () => {
    const hidden = new Set(['sandboxes_list', 'vms_start']);
    const lists = new ToolLists((op) => !hidden.has(op));
    const names = lists.forScopes([...ALL_SCOPES]).tools.map((t) => t.name);
    expect(names).to.have.length(ALL_TOOLS.length - 2);
    expect(names).to.not.include.members([...hidden]);
    expect(names).to.include('sandboxes_get');
    expect(new ToolLists(() => true).forScopes([...ALL_SCOPES]).tools).to.have.length(operations.filter((o) => o.mcp).length);
  });

  it('answer 501 naming the operation when called by name, and are marked unbuilt for the catalog', async () => {
    const h = notBuiltHandler('vms_start', () => notImplemented('vms_start'));
    expect(isBuilt(h)).to.equal(false);
    expect(isBuilt(async () => ({}))).to.equal(true);
    const err = await h({}, {} as never).then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(ApiError);
    expect(err).to.deep.include({ status: 501, message: 'vms_start is not implemented yet' });
  });
});
