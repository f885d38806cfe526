/** Cursors (opaque, strict) and the per-event filters: what a token may see, and what it asked for. */
import { expect } from 'chai';
import { decodeCursor, encodeCursor } from '../../../daemon/events/cursor.js';
import { matches, parseFilter, requireSomeRead, stateAcl, taskAcl, visibleTo, SYSTEM_ACL } from '../../../daemon/events/filter.js';
import type { Caller } from '../../../daemon/lib/caller.js';
import { ApiError } from '../../../daemon/lib/errors.js';

const caller = (scopes: string[], tokenId = 'tok_1', tokenName = 'ci'): Caller => ({ tokenId, tokenName, scopes, transport: 'api', origin: 'n1' });
const status = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    return e instanceof ApiError ? e.status : -1;
  }
  return 0;
};

describe('event cursors', () => {
  it('round-trip one member or several, and name nothing readable in the clear', () => {
    const c = { n1: { epoch: 'ep1', seq: 42 }, n2: { epoch: 'ep2', seq: 0 } };
    const text = encodeCursor(c);
    expect(text).to.match(/^[A-Za-z0-9_-]+$/);
    expect(decodeCursor(text)).to.deep.equal(c);
  });

  it('refuse anything this server did not issue with 400', () => {
    const bad = [
      '',
      'not base64!',
      Buffer.from('{"v":2,"m":{}}').toString('base64url'),
      Buffer.from('{"v":1,"m":{"n1":["e",-1]}}').toString('base64url'),
      Buffer.from('{"v":1,"m":{"n1":["e",1.5]}}').toString('base64url'),
      Buffer.from('{"v":1,"m":{}}').toString('base64url'),
      'a'.repeat(9000),
    ];
    for (const b of bad)
      expect(
        status(() => decodeCursor(b)),
        b.slice(0, 40),
      ).to.equal(400);
  });
});

describe('event filters', () => {
  it('types match exactly or by family; resource matches itself and what lies below it; task_id its task', () => {
    const e = { type: 'vms.state', resource: 'vms/101/disks/d1', data: { task_id: 'task_1' } };
    expect(matches(parseFilter({ types: 'vms.' }), e)).to.equal(true);
    expect(matches(parseFilter({ types: 'vms.state,lxc.' }), e)).to.equal(true);
    expect(matches(parseFilter({ types: 'vms.stat' }), e)).to.equal(false);
    expect(matches(parseFilter({ types: 'lxc.' }), e)).to.equal(false);
    expect(matches(parseFilter({ resource: 'vms/101' }), e)).to.equal(true);
    expect(matches(parseFilter({ resource: 'vms/10' }), e)).to.equal(false);
    expect(matches(parseFilter({ resource: 'vms/101/disks/d1' }), e)).to.equal(true);
    expect(matches(parseFilter({ task_id: 'task_1' }), e)).to.equal(true);
    expect(matches(parseFilter({ task_id: 'task_2' }), e)).to.equal(false);
  });

  it('refuse a malformed type list with 400', () => {
    expect(status(() => parseFilter({ types: 'VMS' }))).to.equal(400);
    expect(status(() => parseFilter({ types: Array.from({ length: 40 }, (_, i) => `t${i}`).join(',') }))).to.equal(400);
  });

  it("an event reaches a token only with its domain's read scope; a sandbox's only its owner", () => {
    expect(visibleTo(stateAcl('vms'), caller(['vm.read']))).to.equal(true);
    expect(visibleTo(stateAcl('vms'), caller(['lxc.read', 'vm.manage']))).to.equal(false);
    expect(visibleTo(stateAcl('lxc'), caller(['lxc.read']))).to.equal(true);
    expect(visibleTo(SYSTEM_ACL, caller(['vm.read']))).to.equal(false);
    expect(visibleTo(SYSTEM_ACL, caller(['system.read']))).to.equal(true);
    expect(visibleTo(stateAcl('sandboxes', 'tok_1'), caller(['sandbox.read'], 'tok_1'))).to.equal(true);
    expect(visibleTo(stateAcl('sandboxes', 'tok_1'), caller(['sandbox.read', 'system.read'], 'tok_2', 'other'))).to.equal(false);
    // The local operator sees everything; the same token id forwarded over the cluster does not get that.
    expect(visibleTo(stateAcl('sandboxes', 'tok_1'), { ...caller([], 'admin', 'admin') })).to.equal(true);
    expect(visibleTo(SYSTEM_ACL, { ...caller([], 'admin', 'admin'), transport: 'cluster' })).to.equal(false);
  });

  it("a task's events reach vm.read or the starting domain's read scope; a sandbox task only its owner", () => {
    expect(visibleTo(taskAcl('lxc.container.move', 'ci'), caller(['lxc.read']))).to.equal(true);
    expect(visibleTo(taskAcl('lxc.container.move', 'ci'), caller(['vm.read']))).to.equal(true);
    expect(visibleTo(taskAcl('lxc.container.move', 'ci'), caller(['apps.read']))).to.equal(false);
    expect(visibleTo(taskAcl('sandboxes.warm-state.save', 'ci'), caller(['sandbox.read'], 'x', 'ci'))).to.equal(true);
    expect(visibleTo(taskAcl('sandboxes.warm-state.save', 'ci'), caller(['sandbox.read', 'vm.read'], 'y', 'other'))).to.equal(false);
  });

  it('a token without any read scope opens nothing (403)', () => {
    expect(status(() => requireSomeRead(caller(['vm.manage'])))).to.equal(403);
    expect(status(() => requireSomeRead(caller(['files.read'])))).to.equal(0);
  });
});
