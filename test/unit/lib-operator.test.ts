/**
 * daemon/lib/operator.ts: the local administrator has one name, `admin`,
 * wherever an owner or actor is recorded. The walk below finds the names the
 * source records for the operator (a task owner or actor fallback when no
 * token made the call); the first release's other names are listed until
 * their domains move to OPERATOR (the list only shrinks: a gone entry fails).
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { OPERATOR, actorOf } from '../../daemon/lib/operator.js';
import { ROOT } from '../helpers/daemon.js';

/** Operator names of the first release still in the source, by file. */
const TO_RENAME: Record<string, string[]> = {};

/**
 * Names recorded that are not the operator: a cloud-init file's owner, the
 * sandboxes domain's VM owner marker, an unauthenticated client of the
 * cluster port, and the runtime itself as the actor of a state change no
 * call made (lxc and apps state events).
 */
const NOT_OPERATOR = new Set(['root:root', 'sandbox', 'anonymous', 'runtime']);

/** Names the text records for whoever acts without a token. */
export function operatorNamesIn(text: string): string[] {
  const found = new Set<string>();
  const patterns = [
    /tokenName\s*\?\?\s*'([^']+)'/g, // ctx.caller?.tokenName ?? '<name>'
    /tokenName:\s*'([^']+)'/g, // a made-up caller
    /\b(?:owner|actor):\s*'([^']+)'/g, // a task's owner, an activity row's actor
    /ACTOR\s*=\s*'([^']+)'/g, // a constant for it
    /'(local-admin)'/g, // the first release's name, wherever it is
    /saveWarm\([^;]*?,\s*'([^']+)'\)/g, // an owner passed positionally (sandboxes)
  ];
  for (const re of patterns) for (const m of text.matchAll(re)) if (!NOT_OPERATOR.has(m[1])) found.add(m[1]);
  return [...found];
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.posix.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(rel));
    else if (e.name.endsWith('.ts')) out.push(rel);
  }
  return out;
}

describe('the operator (daemon/lib/operator.ts)', () => {
  it("is 'admin'; actorOf answers the token's name, or the operator for a call no token made", () => {
    expect(OPERATOR).to.equal('admin');
    expect(actorOf({ caller: { tokenName: 'ci-bot' } })).to.equal('ci-bot');
    expect(actorOf({})).to.equal('admin');
    expect(actorOf(undefined)).to.equal('admin');
  });

  it('the walk finds each way the source names the operator', () => {
    const text = [
      "owner: ctx.caller?.tokenName ?? 'hostd',",
      "const op = { caller: { tokenName: 'local-admin' } };",
      "{ kind: 'x', owner: 'local', resource: 'r' }",
      "export const ADMIN_ACTOR = 'ops';",
      "await this.saveWarm({ image_id: id }, 'daemon');",
      "write_files: [{ owner: 'root:root' }]",
    ].join('\n');
    expect(operatorNamesIn(text).sort()).to.deep.equal(['daemon', 'hostd', 'local', 'local-admin', 'ops']);
  });

  it("every operator name in the source is 'admin', except the listed ones still to be renamed (each still there)", () => {
    const problems: string[] = [];
    const seen = new Set<string>();
    for (const file of [...sourceFiles('daemon'), ...sourceFiles('api'), ...sourceFiles('cluster')]) {
      if (file.startsWith('daemon/lib/')) continue;
      for (const name of operatorNamesIn(fs.readFileSync(path.join(ROOT, file), 'utf8'))) {
        if (name === OPERATOR) continue;
        if (TO_RENAME[file]?.includes(name)) seen.add(`${file}: ${name}`);
        else problems.push(`${file}: records the operator as '${name}'; use OPERATOR ('${OPERATOR}') from daemon/lib/operator.ts`);
      }
    }
    expect(problems, problems.join('\n')).to.deep.equal([]);
    const gone = Object.entries(TO_RENAME)
      .flatMap(([f, ns]) => ns.map((n) => `${f}: ${n}`))
      .filter((x) => !seen.has(x));
    expect(gone, 'renamed: take them off TO_RENAME').to.deep.equal([]);
  });
});
