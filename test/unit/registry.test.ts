import { expect } from 'chai';
import type { OperationSpec } from '../../api/registry/types.js';
import { ACTIVITY_CATEGORIES } from '../../api/registry/types.js';
import { operations as catalog } from '../../api/registry/catalog.js';
import { operations as vms } from '../../api/registry/vms.js';
import { operations as templates } from '../../api/registry/templates.js';
import { operations as tasks } from '../../api/registry/tasks.js';
import { operations as system } from '../../api/registry/system.js';
import { operations as apps } from '../../api/registry/apps.js';
import { operations as lxc } from '../../api/registry/lxc.js';
import { operations as folders } from '../../api/registry/folders.js';
import { operations as locations } from '../../api/registry/locations.js';
import { operations as proxy } from '../../api/registry/proxy.js';
import { operations as sandboxes } from '../../api/registry/sandboxes.js';
import { operations as metrics } from '../../api/registry/metrics.js';
import { operations as events } from '../../api/registry/events.js';
import { operations as tokens } from '../../api/registry/tokens.js';

const files: Record<string, readonly OperationSpec[]> = {
  catalog,
  vms,
  templates,
  tasks,
  system,
  apps,
  lxc,
  folders,
  locations,
  proxy,
  sandboxes,
  metrics,
  events,
  tokens,
};
const all: readonly OperationSpec[] = Object.values(files).flat();

const pathParams = (path: string): string[] => [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]!);

describe('operation registry', () => {
  /** Operations beyond the spec that an issue asked for (each a row in docs/api-decisions.md). */
  const EXTENSIONS = [
    'metrics_get',
    'events_list',
    'events_stream',
    'sandboxes_exec',
    'sandboxes_files_get',
    'sandboxes_files_put',
    'sandboxes_files_delete',
    'sandboxes_fork',
    'tokens_whoami',
    'tokens_list',
    'tokens_create',
    'tokens_revoke',
  ];

  it("declares the spec's 128 endpoints, catalog_get, and the listed extensions", () => {
    expect(all).to.have.length(129 + EXTENSIONS.length);
    for (const name of EXTENSIONS) expect(all.map((op) => op.name)).to.include(name);
    expect(all.filter((op) => op.name !== 'catalog_get' && !EXTENSIONS.includes(op.name))).to.have.length(128);
    expect(all.filter((op) => op.name === 'catalog_get')).to.have.length(1);
  });

  it('uses unique names of at most 64 characters in [a-z0-9_]', () => {
    const names = all.map((op) => op.name);
    for (const name of names) expect(name).to.match(/^[a-z0-9_]{1,64}$/);
    expect(new Set(names).size).to.equal(names.length);
  });

  it('declares each (method, path) pair once', () => {
    const keys = all.map((op) => `${op.method} ${op.path}`);
    expect(new Set(keys).size).to.equal(keys.length);
  });

  it('has a params entry for every path placeholder and no other', () => {
    for (const op of all) {
      expect(op.path, op.name).to.match(/^\//);
      expect(Object.keys(op.params).sort(), op.name).to.deep.equal(pathParams(op.path).sort());
    }
  });

  it('names only declared arguments as required, without duplicates', () => {
    for (const op of all) {
      const required = op.required ?? [];
      expect(new Set(required).size, op.name).to.equal(required.length);
      for (const r of required) expect(op.args, `${op.name}.${r}`).to.have.property(r);
    }
  });

  it('keeps the domain of each file and a known activity category', () => {
    for (const [file, ops] of Object.entries(files)) {
      for (const op of ops) {
        expect(op.domain, op.name).to.equal(file);
        expect(ACTIVITY_CATEGORIES as readonly string[], op.name).to.include(op.category);
      }
    }
  });

  it('does not declare peer_id as an argument except where the operation owns it', () => {
    for (const op of all) {
      if (op.peerId === 'own') expect(op.args, op.name).to.have.property('peer_id');
      else expect(op.args, op.name).to.not.have.property('peer_id');
    }
  });
});
