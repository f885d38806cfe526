/**
 * The layering of ARCHITECTURE.md, enforced: dependency-cruiser runs the rules
 * of .dependency-cruiser.cjs over the source tree, and any cycle or import
 * that climbs the layers fails here. A second test proves the rules bite, on
 * a small tree made of violating imports.
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, runCommand, tempDir } from '../helpers/daemon.js';

const DEPCRUISE = path.join(ROOT, 'node_modules/dependency-cruiser/bin/dependency-cruise.mjs');
const CONFIG = path.join(ROOT, '.dependency-cruiser.cjs');

interface Violation {
  rule: { name: string };
  from: string;
  to: string;
}

async function cruise(cwd: string, dirs: string[]): Promise<{ violations: Violation[]; modules: number }> {
  const r = await runCommand(process.execPath, [DEPCRUISE, '--config', CONFIG, '--output-type', 'json', ...dirs], { timeoutMs: 120_000, cwd });
  if (!r.stdout.trim().startsWith('{')) throw new Error(`dependency-cruiser failed (${r.code}): ${r.stderr.slice(0, 2000)}`);
  const out = JSON.parse(r.stdout);
  return { violations: out.summary.violations, modules: out.modules.length };
}

describe('layering (dependency-cruiser)', function () {
  this.timeout(180_000);

  it('the source tree has no cycle and no import that climbs the layers', async () => {
    const { violations, modules } = await cruise(ROOT, ['api', 'daemon', 'cluster', 'certs']);
    expect(modules).to.be.greaterThan(80);
    const shown = violations.map((v) => `${v.rule.name}: ${v.from} -> ${v.to}`);
    expect(shown, shown.join('\n')).to.deep.equal([]);
  });

  it('the rules catch each kind of violation', async () => {
    const dir = tempDir('hostd-layers-');
    const files: Record<string, string> = {
      'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', allowJs: true } }),
      'api/dispatch.ts': 'export const d = 1;\n',
      'api/registry/index.ts': "import '../../daemon/folders/service.js';\n",
      'api/http/server.ts': "import '../../cluster/mesh.js';\n",
      'daemon/lib/errors.ts': "import '../../api/dispatch.js';\n",
      'daemon/folders/service.ts': "import '../../api/dispatch.js';\nimport '../vms/service.js';\n",
      'daemon/folders/fs/ops.ts': "import '../service.js';\n",
      'daemon/vms/service.ts': "import '../folders/service.js';\n",
      'daemon/activity/log.ts': 'export const l = 1;\n',
      'cluster/mesh.ts': "import '../daemon/folders/service.js';\nimport '../daemon/activity/log.js';\n",
      'daemon/daemon.ts': 'export const root = 1;\n',
      'daemon/store/store.ts': "import '../daemon.js';\n",
      // A service file reaching its runtime folder past driver.ts; a domain-level folder (compose rules) is not a runtime.
      'daemon/apps/actions.ts': "import './docker/engine.js';\nimport './compose/model.js';\n",
      'daemon/apps/docker/engine.ts': 'export const e = 1;\n',
      'daemon/apps/compose/model.ts': 'export const m = 1;\n',
      // The same for folders (no domain keeps an exception): only index.ts composes the service with fs/.
      'daemon/folders/entries.ts': "import './fs/index.js';\n",
      'daemon/folders/index.ts': "import './fs/index.js';\n",
      'daemon/folders/fs/index.ts': 'export const f = 1;\n',
    };
    for (const [f, text] of Object.entries(files)) {
      fs.mkdirSync(path.dirname(path.join(dir, f)), { recursive: true });
      fs.writeFileSync(path.join(dir, f), text);
    }
    const { violations } = await cruise(dir, ['api', 'daemon', 'cluster']);
    const names = new Set(violations.map((v) => v.rule.name));
    for (const rule of [
      'no-circular',
      'lib-imports-nothing-of-ours',
      'registry-is-data',
      'domains-know-no-transport',
      'domains-meet-through-ports',
      'drivers-know-no-service',
      'api-and-cluster-one-way',
      'mesh-imports-no-domain-service',
      'activity-log-has-one-writer',
      'nothing-imports-the-root',
      'storage-and-config-stay-low',
      'services-reach-runtime-through-driver',
    ]) {
      expect([...names], `rule ${rule}`).to.include(rule);
    }
    const boundary = violations.filter((v) => v.rule.name === 'services-reach-runtime-through-driver').map((v) => `${v.from} -> ${v.to}`);
    expect(boundary.sort()).to.deep.equal([
      'daemon/apps/actions.ts -> daemon/apps/docker/engine.ts',
      'daemon/folders/entries.ts -> daemon/folders/fs/index.ts',
    ]);
  });
});
