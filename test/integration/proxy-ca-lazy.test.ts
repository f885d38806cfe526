/**
 * The proxy's internal CA root is made when something needs it (here the
 * certificates list), in a worker thread, and kept: a restart serves the same
 * root from its files instead of making it again. A daemon that never proxies
 * makes none (the start no longer makes it in the background: about 2 s of
 * pure-JS CPU per start before, on every test daemon and every `npm start`).
 */
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { ALL_SCOPES } from '../../api/registry/index.js';
import { startDaemon } from '../helpers/daemon.js';

const roots = (dataDir: string): string[] => {
  const dir = path.join(dataDir, 'proxy', 'ca');
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.startsWith('root-')) : [];
};

describe('proxy internal CA root, made on demand', function () {
  this.timeout(120_000);

  it('is made by the first call that needs it and served from its files after a restart', async () => {
    const d = await startDaemon();
    try {
      const token = await d.token('ca-lazy', [...ALL_SCOPES]);
      const first = await d.request('GET', '/api/v1/proxy/certs', { token });
      expect(first.status, JSON.stringify(first.body)).to.equal(200);
      expect(first.body.internal_ca.root_pem).to.match(/^-----BEGIN CERTIFICATE-----/);
      const files = roots(d.dataDir);
      expect(files).to.have.length(2);
      const mtimes = files.map((f) => fs.statSync(path.join(d.dataDir, 'proxy', 'ca', f)).mtimeMs);
      await d.stop();
      const again = await startDaemon({ dataDir: d.dataDir });
      try {
        const second = await again.request('GET', '/api/v1/proxy/certs', { token });
        expect(second.status).to.equal(200);
        expect(second.body.internal_ca).to.deep.equal(first.body.internal_ca);
        expect(roots(d.dataDir)).to.deep.equal(files);
        expect(files.map((f) => fs.statSync(path.join(d.dataDir, 'proxy', 'ca', f)).mtimeMs)).to.deep.equal(mtimes);
      } finally {
        await again.stop();
      }
    } finally {
      await d.stop();
    }
  });
});
