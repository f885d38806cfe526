/**
 * `npm run readme`: rewrites the README's opening "what this build serves"
 * block from the catalog of a fresh daemon (each operation's `implemented`,
 * that is its handler's isBuilt). Run it after a domain lands; the suite
 * fails while the block is stale.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ROOT, startDaemon, stopAll } from './daemon.js';
import { servedMarkdown, servedOf, withServedBlock, type CatalogRow } from '../../daemon/cli/served.js';

/** The catalog rows of a fresh daemon of this build. */
export async function freshCatalog(): Promise<CatalogRow[]> {
  const d = await startDaemon();
  const r = await d.admin.request('GET', '/api/v1/catalog');
  if (r.status !== 200) throw new Error(`catalog: ${r.status} ${JSON.stringify(r.body)}`);
  await d.stop();
  return r.body.endpoints as CatalogRow[];
}

async function main(): Promise<void> {
  const file = path.join(ROOT, 'README.md');
  const before = fs.readFileSync(file, 'utf8');
  const after = withServedBlock(before, servedMarkdown(servedOf(await freshCatalog())));
  if (after !== before) fs.writeFileSync(file, after);
  process.stdout.write(after === before ? 'README.md: served block already up to date\n' : 'README.md: served block rewritten\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === path.join(ROOT, 'dist/test/helpers/readme.js')) {
  main().then(
    () => stopAll().then(() => process.exit(0)),
    (err) => {
      process.stderr.write(`readme: ${(err as Error).message}\n`);
      void stopAll().then(() => process.exit(1));
    },
  );
}
