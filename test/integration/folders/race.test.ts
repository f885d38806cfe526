/**
 * Check-then-use races: a process with write access inside a folder (an app's
 * mount, an SMB user, a container) swaps a directory and a symlink pointing
 * outside with renameat2(RENAME_EXCHANGE) in a tight loop while the daemon
 * deletes, creates, copies, moves, lists and searches through that
 * directory. Nothing outside the folder may be touched, and no answer may
 * carry anything read from outside.
 *
 * The swapper is a small C program compiled here (python3's ctypes when no C
 * compiler is found).
 */
import { expect } from 'chai';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { openFoldersService, type FoldersService, type Folder } from '../../helpers/folders-service.js';
import { Store } from '../../../daemon/store/store.js';

const SWAPPER_C = `
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <sys/syscall.h>
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
int main(int argc, char **argv) {
  if (argc != 3) return 2;
  if (syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE) != 0) { perror("renameat2"); return 1; }
  puts("swapping");
  fflush(stdout);
  for (;;) syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE);
}
`;

const SWAPPER_PY = `
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
a, b = sys.argv[1].encode(), sys.argv[2].encode()
if libc.renameat2(-100, a, -100, b, 2) != 0:
    sys.exit('renameat2 failed')
print('swapping', flush=True)
while True:
    libc.renameat2(-100, a, -100, b, 2)
`;

/** Every entry under `dir` with type, mode, mtime, content and link text. */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (abs: string, rel: string) => {
    const st = fs.lstatSync(abs);
    let desc = `${st.isDirectory() ? 'd' : st.isSymbolicLink() ? 'l' : 'f'} ${st.mode} ${st.mtimeMs}`;
    if (st.isFile()) desc += ` ${fs.readFileSync(abs, 'utf8')}`;
    if (st.isSymbolicLink()) desc += ` -> ${fs.readlinkSync(abs)}`;
    out[rel] = desc;
    if (st.isDirectory()) for (const n of fs.readdirSync(abs).sort()) walk(path.join(abs, n), `${rel}/${n}`);
  };
  walk(dir, '.');
  return out;
}

describe('folders: a directory swapped for a symlink during every operation', function () {
  this.timeout(180_000);
  const N = 150;
  const names = Array.from({ length: N }, (_, i) => `f${String(i).padStart(3, '0')}`);
  let tmp: string;
  let outside: string;
  let store: Store;
  let svc: FoldersService;
  let folder: Folder;
  let swapperCmd: string[];
  let swapper: ChildProcess | undefined;
  let outsideBefore: Record<string, string>;

  before(async function () {
    tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'hostd-race-'));
    const bin = path.join(tmp, 'swapper');
    try {
      fs.writeFileSync(`${bin}.c`, SWAPPER_C);
      execFileSync('cc', ['-O2', '-o', bin, `${bin}.c`], { stdio: 'pipe' });
      swapperCmd = [bin];
    } catch {
      fs.writeFileSync(`${bin}.py`, SWAPPER_PY);
      swapperCmd = ['python3', `${bin}.py`];
    }
    outside = path.join(tmp, 'outside');
    plantOutside();
    store = await Store.open(path.join(tmp, 'db'));
    svc = await openFoldersService(store, [{ id: 'p', path: path.join(tmp, 'pool') }]);
    folder = (await svc.create({ storage_id: 'p', name: 'attacked' })).folder;
  });

  afterEach(async () => {
    await stopSwapper();
    plantOutside(); // afresh for the next phase, whatever this one did
  });

  after(async () => {
    await stopSwapper();
    await store?.close();
    if (tmp) await fsp.rm(tmp, { recursive: true, force: true });
  });

  /** Outside: files with the names the daemon acts on inside, and a marker that must never be listed. */
  function plantOutside(): void {
    fs.rmSync(outside, { recursive: true, force: true });
    fs.mkdirSync(path.join(outside, 'victim', 'sub'), { recursive: true });
    for (const n of names) fs.writeFileSync(path.join(outside, 'victim', n), 'OUTSIDE');
    fs.writeFileSync(path.join(outside, 'victim', 'OUT-marker'), 'OUTSIDE');
    fs.writeFileSync(path.join(outside, 'victim', 'sub', 'deep'), 'OUTSIDE');
    outsideBefore = snapshot(outside);
  }

  /** Inside the folder: `d` a real directory holding `names` (content 'inside') and `sub/`, `l` a symlink to the outside victim. */
  async function stage(): Promise<void> {
    await fsp.rm(folder.path, { recursive: true, force: true });
    fs.mkdirSync(path.join(folder.path, 'd', 'sub'), { recursive: true });
    for (const n of names) fs.writeFileSync(path.join(folder.path, 'd', n), 'inside');
    fs.writeFileSync(path.join(folder.path, 'd', 'sub', 'deep'), 'inside');
    fs.symlinkSync(path.join(outside, 'victim'), path.join(folder.path, 'l'));
  }

  async function startSwapper(): Promise<void> {
    const p = spawn(swapperCmd[0], [...swapperCmd.slice(1), path.join(folder.path, 'd'), path.join(folder.path, 'l')], { stdio: ['ignore', 'pipe', 'pipe'] });
    swapper = p;
    await new Promise<void>((resolve, reject) => {
      p.once('error', reject);
      p.once('exit', (code) => reject(new Error(`swapper exited with ${code}`)));
      p.stdout!.once('data', () => resolve());
    });
  }

  async function stopSwapper(): Promise<void> {
    const p = swapper;
    swapper = undefined;
    if (!p || p.exitCode !== null || p.signalCode !== null) return;
    const gone = new Promise((r) => p.once('exit', r));
    p.kill('SIGKILL');
    await gone;
  }

  /**
   * Runs `fn` for every name, `passes` times over a freshly staged folder,
   * while the swapper runs; refusals (4xx) are fine, what matters is the
   * disk outside, checked after each pass.
   */
  async function underAttack(fn: (n: string, i: number) => Promise<unknown>, passes = 3): Promise<{ ok: number; refused: number; results: unknown[] }> {
    let ok = 0;
    let refused = 0;
    const results: unknown[] = [];
    for (let pass = 0; pass < passes; pass++) {
      await stage();
      await startSwapper();
      for (const [i, n] of names.entries()) {
        try {
          results.push(await fn(n, i));
          ok++;
        } catch (err) {
          const status = (err as { status?: number }).status;
          if (status === undefined || status >= 500) throw err;
          refused++;
        }
      }
      await stopSwapper();
      // The outside is exactly as it was: nothing deleted, created, moved or changed.
      expect(snapshot(outside), `pass ${pass}`).to.deep.equal(outsideBefore);
    }
    // Some calls got through: the swapper did not just make every call a refusal.
    expect(ok, 'calls answered under attack').to.be.greaterThan(0);
    return { ok, refused, results };
  }

  const id = () => folder.folder_id;

  it('deletes', async () => {
    const r = await underAttack((n) => svc.entriesDelete({ folder_id: id(), sub_path: `d/${n}` }));
    expect(r.ok + r.refused).to.equal(3 * N);
  });

  it('deletes of whole trees', async () => {
    const r = await underAttack(async () => {
      const refused = (err: { status?: number }) => {
        if (err.status === undefined || err.status >= 500) throw err;
      };
      await svc.entriesDelete({ folder_id: id(), sub_path: 'd/sub' }).catch(refused);
      // Put the tree back (through the daemon: the test's own calls would race the swapper too).
      await svc.subfoldersCreate({ folder_id: id(), sub_path: 'd', name: 'sub' }).catch(refused);
      await svc.subfoldersBatchCreate({ folder_id: id(), sub_path: 'd/sub', names: ['x', 'y'] }).catch(refused);
      return null;
    });
    expect(r.ok).to.equal(3 * N);
  });

  it('creates (subfolders, batches)', async () => {
    const r = await underAttack(async (n) => {
      await svc.subfoldersCreate({ folder_id: id(), sub_path: 'd', name: `new-${n}` });
      return svc.subfoldersBatchCreate({ folder_id: id(), sub_path: 'd/sub', names: [`a-${n}`, `b-${n}`] });
    });
    expect(r.ok + r.refused).to.equal(3 * N);
  });

  it('copies (from and into the swapped directory)', async () => {
    const r = await underAttack(async (n, i) => {
      const res = await svc.entriesCopy(
        i % 2 === 0
          ? { src_folder_id: id(), src_sub_path: `d/${n}`, dst_sub_path: `copy-${n}` }
          : { src_folder_id: id(), src_sub_path: 'd/sub', dst_sub_path: `copy-${n}` },
      );
      return res;
    });
    expect(r.ok + r.refused).to.equal(3 * N);
    // No copy holds anything read outside.
    for (const n of names) {
      const p = path.join(folder.path, `copy-${n}`);
      if (!fs.existsSync(p)) continue;
      const file = fs.lstatSync(p).isDirectory() ? path.join(p, 'deep') : p;
      if (fs.existsSync(file)) expect(fs.readFileSync(file, 'utf8'), file).to.equal('inside');
    }
    const r2 = await underAttack((n) => svc.entriesCopy({ src_folder_id: id(), src_sub_path: 'd/sub/deep', dst_sub_path: `d/${n}-copied` }));
    expect(r2.ok + r2.refused).to.equal(3 * N);
  });

  it('moves (out of and into the swapped directory)', async () => {
    const r = await underAttack(async (n, i) => {
      if (i % 2 === 0) return svc.entriesMove({ folder_id: id(), src_sub_path: `d/${n}`, dst_sub_path: `moved-${n}` });
      fs.writeFileSync(path.join(folder.path, `in-${n}`), 'inside');
      return svc.entriesMove({ folder_id: id(), src_sub_path: `in-${n}`, dst_sub_path: `d/in-${n}` });
    });
    expect(r.ok + r.refused).to.equal(3 * N);
    for (const n of names) {
      const p = path.join(folder.path, `moved-${n}`);
      if (fs.existsSync(p)) expect(fs.readFileSync(p, 'utf8')).to.equal('inside');
    }
    const r2 = await underAttack((n) => {
      fs.writeFileSync(path.join(folder.path, `in-${n}`), 'inside');
      return svc.entriesBatchMove({
        folder_id: id(),
        moves: [
          { src_sub_path: `d/${n}`, dst_sub_path: `bm-${n}` },
          { src_sub_path: `in-${n}`, dst_sub_path: `d/bm-in-${n}` },
        ],
      });
    });
    expect(r2.ok + r2.refused).to.equal(3 * N);
    for (const n of names) {
      const p = path.join(folder.path, `bm-${n}`);
      if (fs.existsSync(p)) expect(fs.readFileSync(p, 'utf8')).to.equal('inside');
    }
  });

  it('listings and searches read nothing outside', async () => {
    const r = await underAttack(async (_n, i) => {
      if (i % 2 === 0) return (await svc.contentsList({ folder_id: id(), sub_path: 'd' })).entries.map((e) => e.name);
      return (await svc.search({ folder_id: id(), pattern: 'OUT' })).matches.map((m) => m.path);
    }, 4);
    expect(r.ok + r.refused).to.equal(4 * N);
    const seen = (r.results as string[][]).flat();
    expect(seen.filter((x) => x.includes('OUT'))).to.deep.equal([]);
  });
});
