/**
 * Escalation attempts of the folders domain (`files.read`, `files.manage`)
 * against a real daemon on the real filesystem: traversal in every path-like
 * argument and name, symlinks planted inside a folder (as a container or an
 * app with the folder mounted could plant them) leading out of it, into a
 * pool's internal directories or to /etc, connection targets that are not
 * there, copies into themselves, folder names that collide with the daemon's
 * own directories, and the scopes themselves. Every attempt is answered with
 * its exact status, and after each group the host guard checks that nothing
 * outside was read, written or removed.
 *
 * Writes and deletes through a link are tried only towards directories the
 * test made (outside, the pool root, the internal directories); /etc is only
 * ever read through one, so that a regression cannot damage the host.
 */
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { operationsOfDomain } from '../../../api/registry/index.js';
import { Store } from '../../../daemon/store/store.js';
import { startDaemon, tempDir, type TestDaemon } from '../../helpers/daemon.js';
import { Problems, callFor, minimalArgs, raw, show, type RawReply } from '../../helpers/conformance.js';
import { HostGuard, concurrentTestMount } from '../../helpers/host-guard.js';
import { missingForLocations, releaseDataDirMounts, SmbLab } from '../../helpers/locations-smb.js';
import { requireOrSkip } from '../../helpers/runtime-gate.js';

const API = '/api/v1';
/** Escaping links: name in the folder -> where it leads (filled in `before`). */
type Link = { name: string; to: string; dir: boolean; writable: boolean };

const q = (args: Record<string, unknown>): string => {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(args)) s.append(k, typeof v === 'string' ? v : JSON.stringify(v));
  return `?${s.toString()}`;
};
/** A sub-path as generated clients put it in a URL: each segment percent-encoded. */
const seg = (p: string): string => p.split('/').map(encodeURIComponent).join('/');

function dirState(dir: string): string[] {
  try {
    return fs.readdirSync(dir).sort();
  } catch {
    return ['<missing>'];
  }
}

describe('escalation: folders (files.read, files.manage) on a real daemon', function () {
  this.timeout(300_000);
  let d: TestDaemon;
  let root: string;
  let pool: string;
  let pool2: string;
  let outside: string;
  let rw: string;
  let ro: string;
  let wo: string;
  let F: { folder_id: string; name: string; path: string };
  let G: { folder_id: string; name: string; path: string };
  const guard = new HostGuard();
  const links: Link[] = [];
  /** Directories whose listing must never change by an attempt. */
  const watched: string[] = [];
  let watchedBefore: Map<string, string[]>;
  let etcBefore: string[];

  const send = (method: string, p: string, body?: unknown, token = rw): Promise<RawReply> =>
    raw(d.url, method, p, { token, body: body === undefined ? undefined : JSON.stringify(body), timeoutMs: 60_000 });

  /** Runs one attempt: exact status, the error naming `mention`, and nothing outside in the answer. */
  async function attempt(
    p: Problems,
    what: string,
    method: string,
    url: string,
    body: unknown,
    status: number,
    mention?: string | RegExp,
    token = rw,
  ): Promise<RawReply> {
    const r = await send(method, url, body, token);
    let problem: string | undefined;
    if (r.status !== status) problem = `expected ${status}, got ${show(r)}`;
    else if (mention !== undefined) {
      const msg = String(r.body?.error ?? '');
      if (typeof mention === 'string' ? !msg.includes(mention) : !mention.test(msg)) problem = `message '${msg}' does not match ${String(mention)}`;
    }
    p.add(`${what}: ${method} ${url.slice(0, 160)}${body === undefined ? '' : ` ${JSON.stringify(body).slice(0, 160)}`}`, problem);
    guard.assertNotLeaked(r.text, what);
    // Nothing of /etc comes back either.
    expect(r.text.includes('root:x:0:0'), `${what}: /etc/passwd content in the answer`).to.equal(false);
    return r;
  }

  /** Nothing outside the folders was read, changed, created or removed. */
  function checkHost(): void {
    guard.assertIntact();
    // Other tests on this machine add and remove mounts meanwhile (their network namespaces, their own
    // directories); nothing a folders call does could mount anything there.
    guard.assertHostUnchanged([], { ignore: concurrentTestMount([root]) });
    for (const dir of watched) expect(dirState(dir), `${dir} changed`).to.deep.equal(watchedBefore.get(dir));
    expect(dirState('/etc'), '/etc changed').to.deep.equal(etcBefore);
  }

  before(async function () {
    root = tempDir('hostd-sec-folders-');
    pool = path.join(root, 'pool');
    pool2 = path.join(root, 'pool2');
    outside = path.join(root, 'outside');
    fs.mkdirSync(pool, { recursive: true });
    fs.mkdirSync(pool2, { recursive: true });
    d = await startDaemon({
      dataDir: path.join(root, 'data'),
      configYaml: `storage_pools:\n  - id: p\n    path: ${pool}\n  - id: p2\n    path: ${pool2}\n`,
    });
    rw = await d.token('files-rw', ['files.read', 'files.manage']);
    ro = await d.token('files-ro', ['files.read']);
    wo = await d.token('files-wo', ['files.manage']);
    const mk = async (name: string) => {
      const r = await send('POST', `${API}/folders`, { storage_id: 'p', name });
      expect(r.status, show(r)).to.equal(201);
      return r.body.folder;
    };
    F = await mk('shared');
    G = await mk('other');

    // Sentinels outside every root: beside the pool, in the pool root itself (outside every folder),
    // and in each internal directory a domain keeps in a pool.
    guard.plant(outside, path.join(outside, 'inner'), pool, path.join(pool, '.vms'), path.join(pool, '.hostd-apps'), path.join(pool, '.hostd-lxc'));
    guard.snapshot();
    const sentinelIn = (dir: string) => path.basename(guard.sentinels.find((s) => path.dirname(s.file) === dir)!.file);

    // What a process with the folder mounted could leave in it.
    fs.writeFileSync(path.join(F.path, 'a.txt'), 'a');
    fs.mkdirSync(path.join(F.path, 'docs'));
    fs.writeFileSync(path.join(F.path, 'docs', 'r.txt'), 'r');
    const plant = (name: string, text: string, to: string, dir: boolean, writable: boolean) => {
      fs.symlinkSync(text, path.join(F.path, name));
      links.push({ name, to, dir, writable });
    };
    plant('out-abs', outside, outside, true, true);
    plant('out-rel', path.relative(F.path, outside), outside, true, true);
    plant('up', '..', pool, true, true);
    plant('vms', path.join(pool, '.vms'), path.join(pool, '.vms'), true, true);
    plant('apps', path.join(pool, '.hostd-apps'), path.join(pool, '.hostd-apps'), true, true);
    plant('lxc', '../.hostd-lxc', path.join(pool, '.hostd-lxc'), true, true);
    plant('docs/deep-up', '../../.vms', path.join(pool, '.vms'), true, true);
    plant('etc', '/etc', '/etc', true, false);
    plant('file-out', path.join(outside, sentinelIn(outside)), outside, false, true);
    plant('dangling-out', path.join(outside, 'not-there'), outside, false, true);
    plant('loop', 'loop', '', false, false);
    // An inside link (works normally) and special files (never read).
    fs.symlinkSync('docs', path.join(F.path, 'docs-link'));
    execFileSync('mkfifo', [path.join(F.path, 'fifo')]);
    execFileSync('mknod', [path.join(F.path, 'devnull'), 'c', '1', '3']);

    watched.push(outside, path.join(outside, 'inner'), pool, pool2, path.join(pool, '.vms'), path.join(pool, '.hostd-apps'), path.join(pool, '.hostd-lxc'));
    watchedBefore = new Map(watched.map((w) => [w, dirState(w)]));
    etcBefore = dirState('/etc');
  });

  after(async () => {
    await d?.stop();
    guard.remove();
  });

  /** The name of a sentinel in `dir` (the file an attempt through a link into `dir` goes after). */
  const victim = (dir: string): string => {
    const s = guard.sentinels.find((x) => path.dirname(x.file) === dir);
    return s ? path.basename(s.file) : 'passwd';
  };
  const stay = (arg: string) => `argument '${arg}' must stay inside the folder`;
  const entries = (sub: string) => `${API}/folders/${F.folder_id}/entries/${seg(sub)}`;

  it('refuses every operation through a link that leads out of the folder (400), for each kind of link', async () => {
    const p = new Problems();
    const fid = F.folder_id;
    for (const l of links) {
      const inside = l.dir ? `${l.name}/${victim(l.to)}` : l.name;
      const loopy = l.name === 'loop';
      const bad = (arg: string) => (loopy ? `argument '${arg}' runs into a symlink loop` : stay(arg));
      // Reads: contents, search, as sub_path and as target.path, of the link and through it.
      for (const sub of [l.name, `${l.name}/x`, inside]) {
        await attempt(p, `contents ${l.name}`, 'GET', `${API}/folders/${fid}/contents${q({ sub_path: sub })}`, undefined, 400, bad('sub_path'));
        await attempt(
          p,
          `contents target ${l.name}`,
          'GET',
          `${API}/folders/${fid}/contents${q({ target: { kind: 'folder', id: fid, path: sub } })}`,
          undefined,
          400,
          bad('target.path'),
        );
        await attempt(
          p,
          `search ${l.name}`,
          'GET',
          `${API}/folders/${fid}/search${q({ pattern: 'sentinel', sub_path: sub })}`,
          undefined,
          400,
          bad('sub_path'),
        );
        await attempt(
          p,
          `search target ${l.name}`,
          'GET',
          `${API}/folders/${fid}/search${q({ pattern: 'e', target: { kind: 'folder', id: fid, path: sub } })}`,
          undefined,
          400,
          bad('target.path'),
        );
        // Copying from it (into the folder) would read outside.
        await attempt(p, `copy from ${l.name}`, 'POST', `${entries(sub)}/copy`, { dst_sub_path: 'stolen' }, 400, bad('src_sub_path'));
        await attempt(
          p,
          `copy from target ${l.name}`,
          'POST',
          `${entries('a.txt')}/copy`,
          { src_target: { kind: 'folder', id: fid, path: sub }, dst_folder_id: G.folder_id, dst_sub_path: 'stolen' },
          400,
          bad('src_target.path'),
        );
      }
      if (!l.writable) continue;
      // Writes and deletes: only towards directories this test made.
      for (const sub of [l.name, inside]) {
        await attempt(p, `move ${l.name}`, 'PATCH', entries(sub), { dst_sub_path: 'moved-here' }, 400, bad('src_sub_path'));
        await attempt(p, `delete ${l.name}`, 'DELETE', entries(sub), undefined, 400, bad('sub_path'));
        await attempt(
          p,
          `delete target ${l.name}`,
          'DELETE',
          `${entries('a.txt')}${q({ target: { kind: 'folder', id: fid, path: sub } })}`,
          undefined,
          400,
          bad('target.path'),
        );
        await attempt(
          p,
          `batch move from ${l.name}`,
          'POST',
          `${API}/folders/${fid}/entries/batch`,
          { moves: [{ src_sub_path: sub, dst_sub_path: 'moved-here' }] },
          400,
          bad('moves[0].src_sub_path'),
        );
      }
      if (l.dir) {
        const into = `${l.name}/planted-${l.name.replace(/\W/g, '')}`;
        await attempt(p, `move into ${l.name}`, 'PATCH', entries('a.txt'), { dst_sub_path: into }, 400, bad('dst_sub_path'));
        await attempt(
          p,
          `move into target ${l.name}`,
          'PATCH',
          entries('a.txt'),
          { dst_target: { kind: 'folder', id: fid, path: into } },
          400,
          bad('dst_target.path'),
        );
        await attempt(p, `copy into ${l.name}`, 'POST', `${entries('a.txt')}/copy`, { dst_sub_path: into }, 400, bad('dst_sub_path'));
        await attempt(
          p,
          `copy into target ${l.name}`,
          'POST',
          `${API}/folders/${G.folder_id}/entries/x/copy`,
          { src_target: { kind: 'folder', id: fid, path: 'a.txt' }, dst_target: { kind: 'folder', id: fid, path: into } },
          400,
          bad('dst_target.path'),
        );
        await attempt(
          p,
          `batch move into ${l.name}`,
          'POST',
          `${API}/folders/${fid}/entries/batch`,
          { moves: [{ src_sub_path: 'a.txt', dst_sub_path: into }] },
          400,
          bad('moves[0].dst_sub_path'),
        );
        await attempt(p, `subfolder in ${l.name}`, 'POST', `${API}/folders/${fid}/subfolders`, { name: 'planted', sub_path: l.name }, 400, bad('sub_path'));
        await attempt(
          p,
          `subfolder target ${l.name}`,
          'POST',
          `${API}/folders/${fid}/subfolders`,
          { name: 'planted', target: { kind: 'folder', id: fid, path: l.name } },
          400,
          bad('target.path'),
        );
        await attempt(
          p,
          `subfolders in ${l.name}`,
          'POST',
          `${API}/folders/${fid}/subfolders/batch`,
          { names: ['planted1', 'planted2'], sub_path: l.name },
          400,
          bad('sub_path'),
        );
      }
    }
    p.check(200);
    checkHost();
    // The folder itself is as it was: nothing moved in or out.
    expect(fs.readdirSync(F.path).sort()).to.deep.equal([
      'a.txt',
      'apps',
      'dangling-out',
      'devnull',
      'docs',
      'docs-link',
      'etc',
      'fifo',
      'file-out',
      'loop',
      'lxc',
      'out-abs',
      'out-rel',
      'up',
      'vms',
    ]);
  });

  it('search from the root finds nothing behind a link and no sentinel anywhere', async () => {
    const p = new Problems();
    for (const pattern of ['hostd-sentinel', 'sentinel*', '*', 'passwd', 'root.qcow2']) {
      const r = await attempt(p, `search ${pattern}`, 'GET', `${API}/folders/${F.folder_id}/search${q({ pattern })}`, undefined, 200);
      for (const m of r.body?.matches ?? []) {
        // Every match is an entry of the folder itself (links are matched by name, never entered).
        expect(fs.lstatSync(path.join(F.path, m.path)), m.path).to.be.an('object');
        expect(m.path.split('/').length <= 2 && !links.some((l) => m.path.startsWith(`${l.name}/`)), `${pattern}: ${m.path} is behind a link`).to.equal(true);
      }
    }
    const list = await attempt(p, 'contents root', 'GET', `${API}/folders/${F.folder_id}/contents`, undefined, 200);
    // Links are listed as links (their own size, never their target's).
    expect(list.body.entries.find((e: any) => e.name === 'etc')).to.include({ type: 'symlink', size: 4 });
    expect(list.body.entries.find((e: any) => e.name === 'devnull')).to.include({ type: 'other' });
    p.check(6);
    checkHost();
  });

  it('refuses traversal in every path-like argument, plain and encoded (400), and reads literal look-alikes as names (404)', async () => {
    const p = new Problems();
    const fid = F.folder_id;
    const climbs = ['..', '../', '../x', '../../etc/passwd', 'docs/../..', 'docs/../../x', 'a/b/../../..', './..', 'docs/./../../..'];
    const absolute = ['/', '/etc', '/etc/passwd', '//etc', `${pool}/.vms`];
    // Each case: the value, and the error the server gives for it (the argument's name substituted).
    const cases: Array<[string, (arg: string) => string]> = [
      ...climbs.map((v): [string, (a: string) => string] => [v, stay]),
      ...absolute.map((v): [string, (a: string) => string] => [v, stay]),
      ['..\\x', (a) => `argument '${a}' must not contain backslashes`],
      ['docs\\..\\..\\etc', (a) => `argument '${a}' must not contain backslashes`],
      ['a\u0000b', (a) => `argument '${a}' must not contain NUL bytes`],
      ['docs/\u0000', (a) => `argument '${a}' must not contain NUL bytes`],
    ];
    for (const [v, msg] of cases) {
      await attempt(p, 'contents', 'GET', `${API}/folders/${fid}/contents${q({ sub_path: v })}`, undefined, 400, msg('sub_path'));
      await attempt(
        p,
        'contents target',
        'GET',
        `${API}/folders/${fid}/contents${q({ target: { kind: 'folder', id: fid, path: v } })}`,
        undefined,
        400,
        msg('target.path'),
      );
      await attempt(p, 'search', 'GET', `${API}/folders/${fid}/search${q({ pattern: 'x', sub_path: v })}`, undefined, 400, msg('sub_path'));
      await attempt(p, 'subfolder parent', 'POST', `${API}/folders/${fid}/subfolders`, { name: 'n', sub_path: v }, 400, msg('sub_path'));
      await attempt(
        p,
        'subfolders parent',
        'POST',
        `${API}/folders/${fid}/subfolders/batch`,
        { names: ['n'], target: { kind: 'folder', id: fid, path: v } },
        400,
        msg('target.path'),
      );
      await attempt(p, 'move dst', 'PATCH', entries('a.txt'), { dst_sub_path: v }, 400, msg('dst_sub_path'));
      await attempt(
        p,
        'move src_target',
        'PATCH',
        entries('a.txt'),
        { src_target: { kind: 'folder', id: fid, path: v }, dst_sub_path: 'z' },
        400,
        msg('src_target.path'),
      );
      await attempt(p, 'copy dst', 'POST', `${entries('a.txt')}/copy`, { dst_sub_path: v }, 400, msg('dst_sub_path'));
      await attempt(
        p,
        'copy dst_target',
        'POST',
        `${entries('a.txt')}/copy`,
        { dst_target: { kind: 'folder', id: G.folder_id, path: v } },
        400,
        msg('dst_target.path'),
      );
      await attempt(
        p,
        'delete target',
        'DELETE',
        `${entries('a.txt')}${q({ target: { kind: 'folder', id: fid, path: v } })}`,
        undefined,
        400,
        msg('target.path'),
      );
      await attempt(
        p,
        'batch src',
        'POST',
        `${API}/folders/${fid}/entries/batch`,
        { moves: [{ src_sub_path: v, dst_sub_path: 'z' }] },
        400,
        msg('moves[0].src_sub_path'),
      );
      await attempt(
        p,
        'batch dst',
        'POST',
        `${API}/folders/${fid}/entries/batch`,
        { moves: [{ src_sub_path: 'a.txt', dst_sub_path: v }] },
        400,
        msg('moves[0].dst_sub_path'),
      );
      // The same values as the path parameter (move, copy, delete), percent-encoded per segment as clients
      // send them; an absolute one as one segment ('%2Fetc'), since an empty segment is no segment in a URL path.
      const asParam = v.startsWith('/') ? encodeURIComponent(v) : seg(v);
      const at = `${API}/folders/${fid}/entries/${asParam}`;
      await attempt(p, 'move src', 'PATCH', at, { dst_sub_path: 'z' }, 400, msg('src_sub_path'));
      await attempt(p, 'copy src', 'POST', `${at}/copy`, { dst_sub_path: 'z' }, 400, msg('src_sub_path'));
      await attempt(p, 'delete', 'DELETE', at, undefined, 400, msg('sub_path'));
    }
    // Raw URL spellings of the path parameter, sent byte for byte (no client normalisation).
    const rawPaths: Array<[string, number, string]> = [
      ['..%2F..%2Fetc%2Fpasswd', 400, stay('sub_path')],
      ['%2e%2e/%2e%2e/etc', 400, stay('sub_path')],
      ['%2E%2E', 400, stay('sub_path')],
      ['docs/%2e%2e/%2e%2e', 400, stay('sub_path')],
      ['%2Fetc%2Fpasswd', 400, stay('sub_path')],
      ['%5C..%5C..', 400, "argument 'sub_path' must not contain backslashes"],
      ['a%00b', 400, "argument 'sub_path' must not contain NUL bytes"],
      // Decoded once: these are names, not traversal.
      ['%252e%252e', 404, "no such file or folder '%2e%2e'"],
      ['%252e%252e%252f%252e%252e', 404, "no such file or folder '%2e%2e%2f%2e%2e'"],
      ['%E2%80%A4%E2%80%A4', 404, "no such file or folder '\u2024\u2024'"],
      ['...', 404, "no such file or folder '...'"],
    ];
    for (const [rp, status, msg] of rawPaths) {
      await attempt(p, 'raw delete', 'DELETE', `${API}/folders/${fid}/entries/${rp}`, undefined, status, msg);
      await attempt(p, 'raw move', 'PATCH', `${API}/folders/${fid}/entries/${rp}`, { dst_sub_path: 'z' }, status, msg.replace("'sub_path'", "'src_sub_path'"));
      await attempt(
        p,
        'raw copy',
        'POST',
        `${API}/folders/${fid}/entries/${rp}/copy`,
        { dst_sub_path: 'z' },
        status,
        msg.replace("'sub_path'", "'src_sub_path'"),
      );
    }
    // A folder id is an id, never a path.
    for (const id of ['..', '../..', `${F.name}/..`, pool, '%2e%2e']) {
      await attempt(p, 'folder id', 'GET', `${API}/folders/${encodeURIComponent(id)}/contents`, undefined, 404, `folder '${id}' not found`);
      await attempt(
        p,
        'target id',
        'GET',
        `${API}/folders/${fid}/contents${q({ target: { kind: 'folder', id } })}`,
        undefined,
        404,
        `folder '${id}' not found`,
      );
    }
    p.check(300);
    checkHost();
    expect(fs.readFileSync(path.join(F.path, 'a.txt'), 'utf8')).to.equal('a');
  });

  it('refuses traversal and separators in every name it creates (400)', async () => {
    const p = new Problems();
    const fid = F.folder_id;
    const bad = ['..', '.', 'a/b', '../x', '../../etc', 'a\\b', '..\\..', 'a\u0000b', '/etc', 'x/'];
    for (const name of bad) {
      await attempt(p, 'subfolder name', 'POST', `${API}/folders/${fid}/subfolders`, { name }, 400, "argument 'name'");
      await attempt(p, 'subfolder names[]', 'POST', `${API}/folders/${fid}/subfolders/batch`, { names: ['fine', name] }, 400, "argument 'names[1]'");
      await attempt(p, 'folder name', 'POST', `${API}/folders`, { storage_id: 'p', name }, 400, "argument 'name'");
      await attempt(p, 'folder new_name', 'PATCH', `${API}/folders/${fid}`, { new_name: name }, 400, "argument 'new_name'");
    }
    await attempt(p, 'storage id', 'POST', `${API}/folders`, { storage_id: '../p', name: 'x' }, 404, "storage pool '../p' not found");
    p.check(41);
    checkHost();
    expect(fs.existsSync(path.join(F.path, 'fine')), 'a batch with one bad name creates none').to.equal(false);
    expect(dirState(pool)).to.deep.equal(watchedBefore.get(pool));
  });

  it("refuses folder names of the daemon's own directories in any case, present or not yet made (400)", async () => {
    const p = new Problems();
    // pool2 has none of them yet: a folder there of that name would become the domain's directory once it is made.
    // Also spellings a case-insensitive filesystem folds to the same name (long s, fullwidth h).
    const reserved = [
      '.vms',
      '.VMS',
      '.Vms',
      '.vm\u017f',
      '.hostd-apps',
      '.hostd-lxc',
      '.hostd-anything',
      '.HOSTD-apps',
      '.Hostd-lxc',
      '.\uff48ostd-lxc',
      '.hostd-trash-x',
      '.hostd-copy-x',
    ];
    for (const name of reserved) {
      for (const storage_id of ['p', 'p2']) {
        await attempt(p, `create ${name} in ${storage_id}`, 'POST', `${API}/folders`, { storage_id, name }, 400, "argument 'name'");
      }
      await attempt(p, `rename to ${name}`, 'PATCH', `${API}/folders/${G.folder_id}`, { new_name: name }, 400, "argument 'new_name'");
    }
    p.check(36);
    expect(dirState(pool2), 'nothing made in pool2').to.deep.equal([]);
    const names = (await send('GET', `${API}/folders`)).body.folders.map((f: any) => f.name).sort();
    expect(names).to.deep.equal(['other', 'shared']);
    // Names that only look alike are ordinary names.
    for (const name of ['vms', '.vms2', '.vmsx', 'hostd-apps', '..vms']) {
      const r = await send('POST', `${API}/folders`, { storage_id: 'p2', name });
      expect(r.status, `${name}: ${show(r)}`).to.equal(201);
      expect((await send('DELETE', `${API}/folders/${r.body.folder.folder_id}`)).status).to.equal(200);
    }
    checkHost();
  });

  it('refuses copying or moving a folder into itself, also through an inside link (400)', async () => {
    const p = new Problems();
    const fid = F.folder_id;
    await attempt(p, 'copy into itself', 'POST', `${entries('docs')}/copy`, { dst_sub_path: 'docs/inner' }, 400, "cannot copy 'docs' into itself");
    await attempt(
      p,
      'copy into itself via link',
      'POST',
      `${entries('docs')}/copy`,
      { dst_sub_path: 'docs-link/inner' },
      400,
      "cannot copy 'docs' into itself",
    );
    await attempt(p, 'copy link into its folder', 'POST', `${entries('docs-link')}/copy`, { dst_sub_path: 'docs/inner' }, 200);
    await attempt(p, 'move into itself', 'PATCH', entries('docs'), { dst_sub_path: 'docs/inner2' }, 400, "cannot move 'docs' into itself");
    await attempt(p, 'move into itself via link', 'PATCH', entries('docs'), { dst_sub_path: 'docs-link/inner2' }, 400, "cannot move 'docs' into itself");
    await attempt(
      p,
      'batch into itself',
      'POST',
      `${API}/folders/${fid}/entries/batch`,
      { moves: [{ src_sub_path: 'docs', dst_sub_path: 'docs/x' }] },
      400,
      "cannot move 'docs' into itself",
    );
    await attempt(p, 'copy root', 'POST', `${API}/folders/${fid}/entries/%2F/copy`, { dst_folder_id: G.folder_id }, 400);
    p.check(7);
    // The link copied as a link (text unchanged): docs/inner -> docs, which stays inside.
    expect(fs.readlinkSync(path.join(F.path, 'docs', 'inner'))).to.equal('docs');
    fs.unlinkSync(path.join(F.path, 'docs', 'inner'));
    expect(fs.readdirSync(path.join(F.path, 'docs'))).to.deep.equal(['deep-up', 'r.txt']);
    checkHost();
  });

  it('refuses to copy trees holding links out, special files, or links that would leave the destination; writes nothing', async () => {
    const p = new Problems();
    const t = path.join(F.path, 'tree');
    fs.mkdirSync(path.join(t, 'sub'), { recursive: true });
    fs.writeFileSync(path.join(t, 'ok.txt'), 'ok');
    try {
      fs.symlinkSync(path.join(pool, '.hostd-apps'), path.join(t, 'sub', 'apps'));
      await attempt(
        p,
        'tree with link out',
        'POST',
        `${entries('tree')}/copy`,
        { dst_folder_id: G.folder_id },
        400,
        "cannot copy 'tree': symlink 'tree/sub/apps' points outside the folder",
      );
      fs.unlinkSync(path.join(t, 'sub', 'apps'));
      execFileSync('mkfifo', [path.join(t, 'sub', 'pipe')]);
      await attempt(
        p,
        'tree with a fifo',
        'POST',
        `${entries('tree')}/copy`,
        { dst_folder_id: G.folder_id },
        400,
        "cannot copy 'tree': 'tree/sub/pipe' is not a file, folder or symlink",
      );
      fs.unlinkSync(path.join(t, 'sub', 'pipe'));
      await attempt(
        p,
        'a fifo',
        'POST',
        `${entries('fifo')}/copy`,
        { dst_sub_path: 'fifo2' },
        400,
        "cannot copy 'fifo': 'fifo' is not a file, folder or symlink",
      );
      await attempt(
        p,
        'a device',
        'POST',
        `${entries('devnull')}/copy`,
        { dst_sub_path: 'dev2' },
        400,
        "cannot copy 'devnull': 'devnull' is not a file, folder or symlink",
      );
      // Inside the source, outside the destination once copied: a relative link two levels up, an absolute link into the source.
      fs.symlinkSync('../../a.txt', path.join(t, 'sub', 'rel'));
      await attempt(
        p,
        'relative link leaving the copy',
        'POST',
        `${entries('tree/sub')}/copy`,
        { dst_folder_id: G.folder_id },
        400,
        "cannot copy 'tree/sub': symlink 'sub/rel' would point outside the destination folder",
      );
      fs.unlinkSync(path.join(t, 'sub', 'rel'));
      fs.symlinkSync(path.join(F.path, 'a.txt'), path.join(t, 'sub', 'abs'));
      await attempt(
        p,
        'absolute link into the source',
        'POST',
        `${entries('tree')}/copy`,
        { dst_folder_id: G.folder_id },
        400,
        'would point outside the destination folder',
      );
      p.check(6);
      expect(dirState(G.path), 'nothing written to the destination').to.deep.equal([]);
      expect(fs.readdirSync(F.path).filter((n) => n.startsWith('.hostd-'))).to.deep.equal([]);
    } finally {
      fs.rmSync(t, { recursive: true, force: true });
    }
    checkHost();
  });

  it('deletes trees holding links out by removing the links, never what they point to', async () => {
    const t = path.join(F.path, 'doomed');
    fs.mkdirSync(path.join(t, 'deeper'), { recursive: true });
    for (const l of links.filter((x) => x.writable && x.dir)) fs.symlinkSync(l.to, path.join(t, 'deeper', `to-${l.name.replace(/\W/g, '')}`));
    fs.symlinkSync('/etc', path.join(t, 'etc'));
    const r = await send('DELETE', entries('doomed'));
    expect(r.status, show(r)).to.equal(200);
    expect(fs.existsSync(t)).to.equal(false);
    // A whole folder holding links out, deleted with its record.
    const h = (await send('POST', `${API}/folders`, { storage_id: 'p', name: 'doomed-folder' })).body.folder;
    fs.symlinkSync(outside, path.join(h.path, 'out'));
    fs.symlinkSync(path.join(pool, '.vms'), path.join(h.path, 'vms'));
    const del = await send('DELETE', `${API}/folders/${h.folder_id}`);
    expect(del.status, show(del)).to.equal(200);
    expect(fs.existsSync(h.path)).to.equal(false);
    checkHost();
  });

  it('answers connection targets that name no location with 404, on every operation that takes a target', async () => {
    const p = new Problems();
    const fid = F.folder_id;
    for (const id of ['loc_nope', '../../etc', pool, '']) {
      const t = { kind: 'connection', id };
      const t2 = { kind: 'connection', id, path: 'x' };
      const nf = `location '${id}' not found`;
      await attempt(p, 'contents', 'GET', `${API}/folders/${fid}/contents${q({ target: t })}`, undefined, 404, nf);
      await attempt(p, 'search', 'GET', `${API}/folders/${fid}/search${q({ pattern: 'x', target: t })}`, undefined, 404, nf);
      await attempt(p, 'subfolder', 'POST', `${API}/folders/${fid}/subfolders`, { name: 'n', target: t }, 404, nf);
      await attempt(p, 'subfolders', 'POST', `${API}/folders/${fid}/subfolders/batch`, { names: ['n'], target: t }, 404, nf);
      await attempt(p, 'move', 'PATCH', entries('a.txt'), { src_target: t2, dst_target: { ...t2, path: 'y' } }, 404, nf);
      await attempt(p, 'copy from', 'POST', `${entries('a.txt')}/copy`, { src_target: t2, dst_sub_path: 'y' }, 404, nf);
      await attempt(p, 'copy to', 'POST', `${entries('a.txt')}/copy`, { dst_target: t2 }, 404, nf);
      await attempt(p, 'delete', 'DELETE', `${entries('a.txt')}${q({ target: t2 })}`, undefined, 404, nf);
      await attempt(p, 'batch', 'POST', `${API}/folders/${fid}/entries/batch`, { moves: [{ src_sub_path: 'x', dst_sub_path: 'y' }], target: t }, 404, nf);
    }
    // A move never crosses from a folder to a connection.
    await attempt(
      p,
      'move across',
      'PATCH',
      entries('a.txt'),
      { dst_target: { kind: 'connection', id: 'loc_nope', path: 'a.txt' } },
      400,
      "argument 'dst_target' must name the same folder or connection as the source",
    );
    p.check(37);
    expect(fs.readFileSync(path.join(F.path, 'a.txt'), 'utf8')).to.equal('a');
    checkHost();
  });

  it('files.read cannot write and files.manage alone cannot read: 403 for every folders operation outside the scope, nothing changed', async () => {
    const p = new Problems();
    const ops = operationsOfDomain('folders');
    const before = dirState(F.path);
    const values = { folder_id: F.folder_id, src_folder_id: F.folder_id, src_sub_path: 'a.txt', sub_path: 'a.txt' };
    for (const op of ops) {
      const args: Record<string, unknown> = {
        ...minimalArgs(op),
        ...(op.method === 'POST' && op.name === 'folders_create' ? { storage_id: 'p', name: 'nope' } : {}),
      };
      const c = callFor(op, args, values);
      for (const [tok, scope] of [
        [ro, 'files.read'],
        [wo, 'files.manage'],
      ] as const) {
        if (op.scopes.every((s) => s === scope)) continue;
        const r = await attempt(
          p,
          `${op.name} with only ${scope}`,
          c.method,
          c.path,
          c.body === undefined ? undefined : JSON.parse(c.body),
          403,
          `lacks scope '${op.scopes[0]}'`,
          tok,
        );
        void r;
      }
    }
    p.check(ops.length);
    expect(dirState(F.path)).to.deep.equal(before);
    expect((await send('GET', `${API}/folders`)).body.folders.map((f: any) => f.name).sort()).to.deep.equal(['other', 'shared']);
    checkHost();
  });

  it('serves nothing of a folder made before the reserved-name rule (409 naming the rule); delete forgets the record and keeps the directory', async () => {
    // A folder named like an internal directory, as an older version could have made it: written straight into the store.
    await d.stop();
    const legacyDir = path.join(pool2, '.vms');
    fs.mkdirSync(legacyDir, { recursive: true });
    fs.writeFileSync(path.join(legacyDir, 'disk.qcow2'), 'pretend VM disk');
    const store = await Store.open(path.join(root, 'data', 'db'));
    const rec = { folder_id: 'f_legacyvms0', name: '.vms', storage_id: 'p2', path: legacyDir, created_at: new Date().toISOString() };
    await store.sub('folders').put(rec.folder_id, rec);
    await store.close();
    d = await startDaemon({ dataDir: path.join(root, 'data'), configYaml: `storage_pools:\n  - id: p\n    path: ${pool}\n  - id: p2\n    path: ${pool2}\n` });
    const p = new Problems();
    const reserved = "folder '.vms' has a name reserved for hostd's own directories";
    await attempt(p, 'contents', 'GET', `${API}/folders/${rec.folder_id}/contents`, undefined, 409, reserved);
    await attempt(p, 'search', 'GET', `${API}/folders/${rec.folder_id}/search?pattern=disk`, undefined, 409, reserved);
    await attempt(
      p,
      'target',
      'GET',
      `${API}/folders/${F.folder_id}/contents${q({ target: { kind: 'folder', id: rec.folder_id } })}`,
      undefined,
      409,
      reserved,
    );
    await attempt(p, 'copy out', 'POST', `${API}/folders/${rec.folder_id}/entries/disk.qcow2/copy`, { dst_folder_id: F.folder_id }, 409, reserved);
    await attempt(p, 'copy in', 'POST', `${entries('a.txt')}/copy`, { dst_folder_id: rec.folder_id }, 409, reserved);
    await attempt(p, 'delete entry', 'DELETE', `${API}/folders/${rec.folder_id}/entries/disk.qcow2`, undefined, 409, reserved);
    await attempt(p, 'subfolder', 'POST', `${API}/folders/${rec.folder_id}/subfolders`, { name: 'x' }, 409, reserved);
    // Renaming it would move the domain's directory away from under it.
    await attempt(p, 'rename', 'PATCH', `${API}/folders/${rec.folder_id}`, { new_name: 'old-vms' }, 409, reserved);
    p.check(8);
    // Listed (so that an operator sees it); deleting it forgets the record and keeps the directory as it is.
    expect((await send('GET', `${API}/folders`)).body.folders.map((f: any) => f.name)).to.include('.vms');
    const del = await send('DELETE', `${API}/folders/${rec.folder_id}`);
    expect(del.status, show(del)).to.equal(200);
    expect(del.body).to.deep.include({ deleted: true, directory_kept: true });
    expect(fs.readFileSync(path.join(legacyDir, 'disk.qcow2'), 'utf8')).to.equal('pretend VM disk');
    expect((await send('GET', `${API}/folders/${rec.folder_id}/contents`)).status).to.equal(404);
    fs.rmSync(legacyDir, { recursive: true });
    checkHost();
  });
});

describe('escalation: folders on a connected location (a real smbd)', function () {
  this.timeout(300_000);
  let lab: SmbLab | null = null;
  let d: TestDaemon;
  let dataDir: string;
  let token: string;
  let locId: string;
  const guard = new HostGuard();

  const call = (method: string, p: string, body?: unknown) => d.request(method, `${API}${p}`, { token, body });

  before(async function () {
    const why = await missingForLocations();
    requireOrSkip(this, 'locations', why);
    lab = new SmbLab();
    await lab.setup();
    await lab.start();
    dataDir = tempDir('hostd-sec-folders-loc-');
    // hostd in the lab's network namespace (smbnetfs needs the share on port 445 of its loopback).
    d = await startDaemon({ dataDir, wrap: lab.wrap, netns: lab.ns });
    token = await d.token('files-conn', ['files.read', 'files.manage', 'connections.manage', 'connections.read']);
    const r = await call('POST', '/locations', { name: 'share', remote: '//127.0.0.1/guest' });
    expect(r.status, r.text).to.equal(201);
    locId = r.body.location.location_id;
    fs.writeFileSync(path.join(lab.guestDir, 'on-share.txt'), 'share');
    guard.plant(path.join(dataDir, 'locations'), path.join(dataDir, 'outside'));
    guard.snapshot();
  });

  after(async () => {
    if (dataDir) await releaseDataDirMounts(dataDir);
    await d?.stop();
    if (dataDir) await releaseDataDirMounts(dataDir);
    await lab?.cleanup();
    guard.remove();
  });

  it('confines paths to the share (400 naming the location) and reads what is in it', async () => {
    const t = (p?: string) => ({ kind: 'connection', id: locId, ...(p === undefined ? {} : { path: p }) });
    const ok = await call('GET', `/folders/_/contents${q({ target: t() })}`);
    expect(ok.status, ok.text).to.equal(200);
    expect(ok.body.entries.map((e: any) => e.name)).to.include('on-share.txt');
    for (const p of ['..', '../..', '../../secrets', '/etc', 'a/../..']) {
      const r = await call('GET', `/folders/_/contents${q({ target: t(p) })}`);
      expect([r.status, r.body], p).to.deep.equal([400, { error: "argument 'target.path' must stay inside the location" }]);
      const c = await call('POST', '/folders/_/entries/x/copy', { src_target: t('on-share.txt'), dst_target: t(p) });
      expect(c.status, `${p}: ${c.text}`).to.equal(400);
      guard.assertNotLeaked(r.text + c.text);
    }
    guard.assertIntact();
  });

  it('answers 409 for a location that is not mounted, on every operation that takes a target, touching nothing', async () => {
    expect((await call('POST', `/locations/${locId}/disconnect`)).status).to.equal(200);
    const t = { kind: 'connection', id: locId };
    const t2 = { ...t, path: 'on-share.txt' };
    const not = "location 'share' is not mounted: it is disconnected (reconnect it first)";
    const attempts: Array<[string, string, unknown]> = [
      ['GET', `/folders/_/contents${q({ target: t })}`, undefined],
      ['GET', `/folders/_/search${q({ pattern: 'share', target: t })}`, undefined],
      ['POST', '/folders/_/subfolders', { name: 'n', target: t }],
      ['POST', '/folders/_/subfolders/batch', { names: ['n'], target: t }],
      ['PATCH', '/folders/_/entries/x', { src_target: t2, dst_target: { ...t, path: 'moved.txt' } }],
      ['POST', '/folders/_/entries/x/copy', { src_target: t2, dst_target: { ...t, path: 'copy.txt' } }],
      ['DELETE', `/folders/_/entries/x${q({ target: t2 })}`, undefined],
      ['POST', '/folders/_/entries/batch', { moves: [{ src_sub_path: 'on-share.txt', dst_sub_path: 'm.txt' }], target: t }],
    ];
    for (const [method, p, body] of attempts) {
      const r = await call(method, p, body);
      expect([r.status, r.body], `${method} ${p}`).to.deep.equal([409, { error: not }]);
    }
    // The mount directory is an empty directory now: nothing was made in it, and the share is as it was.
    const mnt = path.join(dataDir, 'locations', 'mnt', locId);
    expect(fs.existsSync(mnt) ? fs.readdirSync(mnt) : []).to.deep.equal([]);
    expect(fs.readdirSync(lab!.guestDir).sort()).to.deep.equal(['on-share.txt']);
    guard.assertIntact();
  });
});
