/**
 * What a folders token can make the daemon hold, measured on a real daemon
 * from /proc/<pid>/status (the peak resident size, VmHWM, reset before a call
 * and read after it, against VmRSS before it), with a generous bound and never
 * a time: a listing of a folder with a hundred thousand entries, a search over
 * a deep and wide tree, and a search pattern that a regular expression would
 * backtrack on for hours. Every tree is one a files.manage token (or an app or
 * container with the folder mounted) can build.
 */
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { startDaemon, tempDir, type TestDaemon } from '../../helpers/daemon.js';
import { raw, show } from '../../helpers/conformance.js';

const API = '/api/v1';
const MiB = 1024 * 1024;
/** Growth of the daemon's peak resident size one call may cause (the unbounded code took 300-500 MiB here). */
const BOUND = 150 * MiB;

function status(pid: number): { rss: number; hwm: number } {
  const s = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(s)![1]) * 1024;
  return { rss: kb('VmRSS'), hwm: kb('VmHWM') };
}

describe('escalation: what a folders token can make the daemon hold', function () {
  this.timeout(900_000);
  let d: TestDaemon;
  let root: string;
  let pool: string;
  let token: string;
  let folder: { folder_id: string; path: string };

  const get = (p: string) => raw(d.url, 'GET', p, { token, timeoutMs: 300_000 });
  /**
   * Runs `fn` and returns how far the daemon's resident size rose above where
   * it stood before, at its peak: the peak is reset first (`5` into
   * clear_refs), so an earlier call's peak cannot hide this one's.
   */
  async function growth<T>(
    fn: () => Promise<T>,
  ): Promise<{ value: T; grew: number; before: { rss: number; hwm: number }; after: { rss: number; hwm: number } }> {
    fs.writeFileSync(`/proc/${d.proc.pid}/clear_refs`, '5');
    const before = status(d.proc.pid!);
    const value = await fn();
    const after = status(d.proc.pid!);
    return { value, grew: after.hwm - before.rss, before, after };
  }
  const mb = (n: number) => `${Math.round(n / MiB)} MiB`;

  before(async () => {
    root = tempDir('hostd-sec-mem-');
    pool = path.join(root, 'pool');
    fs.mkdirSync(pool, { recursive: true });
    d = await startDaemon({ dataDir: path.join(root, 'data'), configYaml: `storage_pools:\n  - id: p\n    path: ${pool}\n` });
    token = await d.token('files', ['files.read', 'files.manage']);
    const r = await raw(d.url, 'POST', `${API}/folders`, { token, body: JSON.stringify({ storage_id: 'p', name: 'big' }) });
    expect(r.status, show(r)).to.equal(201);
    folder = r.body.folder;
  });

  after(async () => {
    await d?.stop();
    // Deep trees are beyond PATH_MAX for the recursive removal of the test helpers: rm walks them relative.
    if (root) execFileSync('rm', ['-rf', '--one-file-system', root]);
  });

  it('lists a folder of 100,000 entries within a bounded memory: the first 10,000 (folders first, then by name), truncated', async () => {
    const dir = path.join(folder.path, 'many');
    fs.mkdirSync(dir);
    // Hard links to a few files: directory entries only (ext4 allows 65,000 links per file).
    const long = 'n'.repeat(180);
    const N = 100_000;
    for (let i = 0; i < N; i++) {
      const file = path.join(dir, `orig-${Math.floor(i / 60_000)}`);
      if (i % 60_000 === 0) fs.writeFileSync(file, 'x');
      fs.linkSync(file, path.join(dir, `${long}-${String(i).padStart(6, '0')}`));
    }
    for (const n of ['zz-dir-1', 'zz-dir-2', 'zz-dir-3']) fs.mkdirSync(path.join(dir, n));
    const m = await growth(() => get(`${API}/folders/${folder.folder_id}/contents?sub_path=many`));
    const r = m.value;
    expect(r.status, show(r)).to.equal(200);
    expect(m.grew, `peak resident size grew by ${mb(m.grew)} (rss ${mb(m.before.rss)} -> ${mb(m.after.rss)})`).to.be.below(BOUND);
    expect(r.body.truncated).to.equal(true);
    expect(r.body.entries).to.have.length(10_000);
    // Folders first, then names in order: what an untruncated answer starts with.
    expect(r.body.entries.slice(0, 4).map((e: any) => e.name)).to.deep.equal(['zz-dir-1', 'zz-dir-2', 'zz-dir-3', `${long}-000000`]);
    expect(r.body.entries[9_999].name).to.equal(`${long}-009996`);
    // A small folder is listed whole and says so.
    const small = await get(`${API}/folders/${folder.folder_id}/contents`);
    expect(small.status, show(small)).to.equal(200);
    expect(small.body).to.deep.include({ truncated: false });
    expect(small.body.entries.map((e: any) => e.name)).to.deep.equal(['many']);
    execFileSync('rm', ['-rf', dir]);
  });

  it('searches a tree 40 folders deep (250-byte names) with 50,000 folders at the bottom within a bounded memory', async () => {
    // A path string per queued folder would cost its depth (10 KB) each: 500 MB for this tree.
    execFileSync('bash', [
      '-c',
      'set -e; cd "$1"; n=$(printf "d%.0s" $(seq 250)); for i in $(seq 40); do mkdir "$n"; cd "$n"; done; seq -f "w%06g" 50000 | xargs mkdir',
      'tree',
      folder.path,
    ]);
    const m = await growth(() => get(`${API}/folders/${folder.folder_id}/search?pattern=w012345`));
    const r = m.value;
    expect(r.status, show(r)).to.equal(200);
    expect(r.body.truncated).to.equal(false);
    expect(r.body.matches.map((x: any) => x.path)).to.deep.equal([[...Array(40).fill('d'.repeat(250)), 'w012345'].join('/')]);
    expect(m.grew, `peak resident size grew by ${mb(m.grew)} (rss ${mb(m.before.rss)} -> ${mb(m.after.rss)})`).to.be.below(BOUND);
    const none = await get(`${API}/folders/${folder.folder_id}/search?pattern=nothing-like-this`);
    expect(none.status, show(none)).to.equal(200);
    expect(none.body).to.deep.include({ matches: [], truncated: false });
  });

  it('answers a glob that a regular expression would backtrack on for hours, and matches globs exactly', async () => {
    const dir = path.join(folder.path, 'globs');
    fs.mkdirSync(dir);
    for (const n of ['a'.repeat(255), `${'a'.repeat(200)}b`, 'aXbXc', 'abc', 'ABBA.txt', 'ab']) fs.writeFileSync(path.join(dir, n), '');
    const search = async (pattern: string) => {
      const r = await get(`${API}/folders/${folder.folder_id}/search?sub_path=globs&pattern=${encodeURIComponent(pattern)}`);
      expect(r.status, show(r)).to.equal(200);
      return r.body.matches.map((x: any) => x.name).sort();
    };
    // The daemon's one thread would be stuck on the first name (the request then never gets an answer).
    expect(await search('a*a*a*a*a*a*a*a*a*a*a*a*b')).to.deep.equal([`${'a'.repeat(200)}b`]);
    expect(await search('*a*a*a*a*a*a*a*a*a*a*a*a*c')).to.deep.equal([]);
    expect(await search('a*b*c')).to.deep.equal(['aXbXc', 'abc'].sort());
    expect(await search('ab*')).to.deep.equal(['ABBA.txt', 'ab', 'abc'].sort());
    expect(await search('*.TXT')).to.deep.equal(['ABBA.txt']);
    expect(await search('ab*ba*')).to.deep.equal(['ABBA.txt']);
    expect(await search('a*a')).to.deep.equal(['a'.repeat(255)]);
    expect(await search('*')).to.have.length(6);
    expect(await search('b')).to.deep.equal([`${'a'.repeat(200)}b`, 'ABBA.txt', 'aXbXc', 'ab', 'abc'].sort());
  });
});
