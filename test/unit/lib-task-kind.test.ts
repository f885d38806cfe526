/**
 * daemon/lib/task-kind.ts: task kinds are `<domain>.<resource>.<verb>` with
 * the registry's domain names. The form is checked here, and so is every kind
 * the daemon's source starts a task with: a new kind of another form fails,
 * and the kinds of the first release that are still to be renamed are listed
 * below (each entry goes when its domain renames it; a gone one fails too, so
 * the list only shrinks).
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { taskKindProblem } from '../../daemon/lib/task-kind.js';
import { DOMAINS } from '../../api/registry/types.js';
import { ROOT } from '../helpers/daemon.js';

/** Kinds in the source today that are not of the form yet, by file: the domain engineers rename them. */
const TO_RENAME: Record<string, string[]> = {};

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.posix.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(rel));
    else if (e.name.endsWith('.ts')) out.push(rel);
  }
  return out;
}

/**
 * Task kinds in a source text: the `kind: '...'` literal of each task start
 * (tasks.start, lockedTask, startHolding: within the call's first lines), and
 * any `kind: '<a>.<b>'` literal (only task kinds have a dot).
 */
export function kindsIn(text: string): string[] {
  const found = new Set<string>();
  for (const m of text.matchAll(/(?:tasks\.start|lockedTask|startHolding)\(([\s\S]{0,600})/g)) {
    const k = /kind:\s*'([^']*)'/.exec(m[1]);
    if (k) found.add(k[1]);
  }
  for (const m of text.matchAll(/\bkind:\s*'([^'.]*\.[^']*)'/g)) found.add(m[1]);
  return [...found];
}

describe('task kinds (daemon/lib/task-kind.ts)', () => {
  it('the form: <domain>.<resource>.<verb>, lowercase words, hyphenated, a registry domain first', () => {
    for (const ok of ['vms.vm.create', 'lxc.image.download', 'vms.warm-state.save', 'templates.template.build', 'apps.app.install']) {
      expect(taskKindProblem(ok, DOMAINS), ok).to.equal(null);
    }
    expect(taskKindProblem('vms.create', DOMAINS)).to.equal("task kind 'vms.create' is not <domain>.<resource>.<verb> (lowercase words, hyphenated)");
    expect(taskKindProblem('containers.ct.move', DOMAINS)).to.match(/^task kind 'containers.ct.move' names 'containers', which is not a registry domain/);
    for (const bad of ['VMS.vm.create', 'vms.vm.', 'vms..create', 'vms.vm.create.now', 'vms.vm_x.create', 'vms.-vm.create', 'vms.vm.create-']) {
      expect(taskKindProblem(bad, DOMAINS), bad).to.not.equal(null);
    }
  });

  it('finds the kind of a task start written across lines, and of any dotted kind literal', () => {
    const text =
      "const t = this.d.tasks.start(\n  { kind: 'apps.app.install', title: 'x' },\n  async () => 1);\nconst g = { kind: 'vm' };\nconst h = { kind: 'lxc.image.move' };";
    expect(kindsIn(text).sort()).to.deep.equal(['apps.app.install', 'lxc.image.move']);
  });

  it('every task kind in the daemon is of the form, except the listed ones still to be renamed (and each of those is still there)', () => {
    const problems: string[] = [];
    const seenDebt = new Set<string>();
    let kinds = 0;
    for (const file of [...sourceFiles('daemon'), ...sourceFiles('api'), ...sourceFiles('cluster')]) {
      if (file.startsWith('daemon/lib/')) continue;
      for (const kind of kindsIn(fs.readFileSync(path.join(ROOT, file), 'utf8'))) {
        kinds++;
        const p = taskKindProblem(kind, DOMAINS);
        if (!p) continue;
        if (TO_RENAME[file]?.includes(kind)) seenDebt.add(`${file}: ${kind}`);
        else problems.push(`${file}: ${p}`);
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
    const listed = Object.entries(TO_RENAME).flatMap(([f, ks]) => ks.map((k) => `${f}: ${k}`));
    const gone = listed.filter((x) => !seenDebt.has(x));
    expect(gone, 'renamed or removed: take them off TO_RENAME').to.deep.equal([]);
    expect(kinds, 'task kinds found in the source').to.be.at.least(15);
  });
});
