/**
 * Path confinement for the folders domain, against a real directory tree with
 * symlinks pointing inside, outside, nowhere and in circles.
 */
import { expect } from 'chai';
import { rejectsApi } from '../../helpers/expect.js';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { ApiError } from '../../../daemon/lib/errors.js';
import { confine, confinePath, isInsideOrEqual, isStrictlyInside } from '../../../daemon/folders/fs/paths.js';
import { splitSubPath, validateName } from '../../../daemon/folders/names.js';

function throwsApi(fn: () => unknown, status: number, message: string): void {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught, `expected ApiError ${status} '${message}'`).to.be.instanceOf(ApiError);
  expect((caught as ApiError).status).to.equal(status);
  expect((caught as ApiError).message).to.equal(message);
}

describe('folders paths: validateName', () => {
  it('accepts ordinary names, dots inside, spaces and unicode', () => {
    for (const n of ['media', '.hidden', 'a.b.c', 'with space', 'ünïcødé', '...', 'x'.repeat(255)]) {
      expect(validateName(n)).to.equal(n);
    }
  });

  it('refuses empty, separators, NUL, dot names and long names, naming the argument', () => {
    throwsApi(() => validateName('', 'name'), 400, "argument 'name' must not be empty");
    throwsApi(() => validateName('a/b', 'new_name'), 400, "argument 'new_name' must be a single name without '/'");
    throwsApi(() => validateName('/', 'name'), 400, "argument 'name' must be a single name without '/'");
    throwsApi(() => validateName('a\\b', 'name'), 400, "argument 'name' must not contain backslashes");
    throwsApi(() => validateName('a\0b', 'name'), 400, "argument 'name' must not contain NUL bytes");
    throwsApi(() => validateName('.', 'name'), 400, "argument 'name' must not be '.' or '..'");
    throwsApi(() => validateName('..', 'names[2]'), 400, "argument 'names[2]' must not be '.' or '..'");
    throwsApi(() => validateName('x'.repeat(256), 'name'), 400, "argument 'name' must be at most 255 bytes");
    // 128 two-byte characters are 256 bytes.
    throwsApi(() => validateName('é'.repeat(128), 'name'), 400, "argument 'name' must be at most 255 bytes");
    throwsApi(() => validateName(42, 'name'), 400, "argument 'name' must be a string");
  });
});

describe('folders paths: splitSubPath', () => {
  it('treats null, undefined and empty as the root', () => {
    expect(splitSubPath(undefined)).to.deep.equal([]);
    expect(splitSubPath(null)).to.deep.equal([]);
    expect(splitSubPath('')).to.deep.equal([]);
    expect(splitSubPath('.')).to.deep.equal([]);
  });

  it("collapses empty and '.' segments and a trailing slash", () => {
    expect(splitSubPath('a//b/')).to.deep.equal(['a', 'b']);
    expect(splitSubPath('./a/./b')).to.deep.equal(['a', 'b']);
    expect(splitSubPath('a...b/..c')).to.deep.equal(['a...b', '..c']);
  });

  it("refuses '..', absolute paths, NUL bytes, backslashes and long segments", () => {
    throwsApi(() => splitSubPath('..'), 400, "argument 'sub_path' must stay inside the folder");
    throwsApi(() => splitSubPath('a/../../x'), 400, "argument 'sub_path' must stay inside the folder");
    throwsApi(() => splitSubPath('a/..'), 400, "argument 'sub_path' must stay inside the folder");
    throwsApi(() => splitSubPath('/etc'), 400, "argument 'sub_path' must stay inside the folder");
    throwsApi(() => splitSubPath('/'), 400, "argument 'sub_path' must stay inside the folder");
    throwsApi(() => splitSubPath('a\0b'), 400, "argument 'sub_path' must not contain NUL bytes");
    throwsApi(() => splitSubPath('..\\x'), 400, "argument 'sub_path' must not contain backslashes");
    throwsApi(() => splitSubPath('ok/' + 'y'.repeat(256)), 400, "argument 'sub_path' has a path segment longer than 255 bytes");
    throwsApi(() => splitSubPath(7), 400, "argument 'sub_path' must be a string");
  });

  it('names the argument and the kind of root', () => {
    throwsApi(() => splitSubPath('..', { arg: 'target.path', within: 'location' }), 400, "argument 'target.path' must stay inside the location");
  });
});

describe('folders paths: isInside helpers', () => {
  it('compares on segment boundaries', () => {
    expect(isInsideOrEqual('/a/b', '/a/b')).to.equal(true);
    expect(isInsideOrEqual('/a/b', '/a/b/c')).to.equal(true);
    expect(isInsideOrEqual('/a/b', '/a/bc')).to.equal(false);
    expect(isStrictlyInside('/a/b', '/a/b')).to.equal(false);
    expect(isStrictlyInside('/a/b', '/a/b/c')).to.equal(true);
  });
});

describe('folders paths: confine (real filesystem)', () => {
  let tmp: string;
  let root: string;
  let realRoot: string;
  let outside: string;

  before(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'hostd-paths-'));
    root = path.join(tmp, 'root');
    outside = path.join(tmp, 'outside');
    await fs.mkdir(path.join(root, 'a', 'b'), { recursive: true });
    await fs.mkdir(outside);
    await fs.writeFile(path.join(outside, 'secret.txt'), 'secret');
    await fs.writeFile(path.join(root, 'f.txt'), 'file');
    await fs.symlink(outside, path.join(root, 'out')); // absolute, outside
    await fs.symlink('../outside', path.join(root, 'rel-out')); // relative, outside
    await fs.symlink('a', path.join(root, 'in')); // inside
    await fs.symlink(path.join(tmp, 'not-there', 'x'), path.join(root, 'dangling-out'));
    await fs.symlink('a/not-yet', path.join(root, 'dangling-in'));
    await fs.symlink('loop2', path.join(root, 'loop1'));
    await fs.symlink('loop1', path.join(root, 'loop2'));
    await fs.symlink('../..', path.join(root, 'a', 'up')); // tmp: outside
    await fs.symlink('..', path.join(root, 'a', 'self')); // the root itself
    await fs.symlink(root, path.join(tmp, 'root-link'));
    realRoot = await fs.realpath(root);
  });

  after(async () => {
    await fs.rm(tmp, { recursive: true, force: true });
  });

  it('returns the real root for the root', async () => {
    expect(await confine(root, '')).to.deep.equal({ abs: realRoot, rel: '', root: realRoot });
    expect(await confinePath(root, undefined)).to.equal(realRoot);
  });

  it('returns absolute paths for existing and missing paths inside', async () => {
    expect(await confine(root, 'a/b')).to.deep.equal({ abs: path.join(realRoot, 'a', 'b'), rel: 'a/b', root: realRoot });
    expect(await confinePath(root, 'a//new/deeper/')).to.equal(path.join(realRoot, 'a', 'new', 'deeper'));
    expect(await confinePath(root, 'f.txt/x')).to.equal(path.join(realRoot, 'f.txt', 'x'));
  });

  it('resolves symlinks in parent components but keeps the final entry itself', async () => {
    expect(await confinePath(root, 'in')).to.equal(path.join(realRoot, 'in'));
    expect(await confinePath(root, 'in/b')).to.equal(path.join(realRoot, 'a', 'b'));
    expect(await confinePath(root, 'a/self/f.txt')).to.equal(path.join(realRoot, 'f.txt'));
    expect(await confinePath(root, 'dangling-in')).to.equal(path.join(realRoot, 'dangling-in'));
    expect(await confinePath(root, 'dangling-in/x')).to.equal(path.join(realRoot, 'a', 'not-yet', 'x'));
  });

  it('works when the root is reached through a symlink', async () => {
    expect(await confinePath(path.join(tmp, 'root-link'), 'a')).to.equal(path.join(realRoot, 'a'));
  });

  it('refuses lexical escapes before touching the disk', async () => {
    const msg = "argument 'sub_path' must stay inside the folder";
    await rejectsApi(confine(root, '..'), 400, msg);
    await rejectsApi(confine(root, 'a/../../x'), 400, msg);
    await rejectsApi(confine(root, '/etc'), 400, msg);
    await rejectsApi(confine(root, 'a\0'), 400, "argument 'sub_path' must not contain NUL bytes");
    await rejectsApi(confine(root, 'a\\..\\..'), 400, "argument 'sub_path' must not contain backslashes");
  });

  it('refuses symlinks pointing outside, as the target and as a path component', async () => {
    const msg = "argument 'sub_path' must stay inside the folder";
    for (const p of [
      'out',
      'out/secret.txt',
      'out/new-file',
      'rel-out',
      'rel-out/secret.txt',
      'a/up',
      'a/up/outside',
      'in/up',
      'dangling-out',
      'dangling-out/y',
    ]) {
      await rejectsApi(confine(root, p), 400, msg);
    }
  });

  it('refuses symlink loops', async () => {
    await rejectsApi(confine(root, 'loop1'), 400, "argument 'sub_path' runs into a symlink loop");
    await rejectsApi(confine(root, 'loop1/x'), 400, "argument 'sub_path' runs into a symlink loop");
  });

  it('names the argument and the kind of root in its messages', async () => {
    await rejectsApi(confine(root, 'out', { arg: 'dst_target.path', within: 'location' }), 400, "argument 'dst_target.path' must stay inside the location");
  });

  it('passes the error of a missing root through', async () => {
    let caught: NodeJS.ErrnoException | undefined;
    try {
      await confine(path.join(tmp, 'no-root'), 'a');
    } catch (err) {
      caught = err as NodeJS.ErrnoException;
    }
    expect(caught?.code).to.equal('ENOENT');
  });

  it('left the outside untouched', async () => {
    expect(await fs.readdir(outside)).to.deep.equal(['secret.txt']);
    expect(await fs.readFile(path.join(outside, 'secret.txt'), 'utf8')).to.equal('secret');
  });
});
