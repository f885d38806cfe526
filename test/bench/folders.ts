/**
 * The cost of resolving from open directories (daemon/folders/fs) on the
 * folders hot paths, listing and creating, against plain path-based fs calls
 * doing the same work in the same run (realpath of the parent, then readdir
 * and an lstat per entry; or mkdir and an lstat), which is what the folders
 * domain did before and what races a process swapping a folder for a link.
 */
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { LocalFiles } from '../../daemon/folders/fs/index.js';
import { median, print } from './lib.js';

const ENTRIES = 200;
const ROUNDS = 7;
const PER_ROUND = 60;

async function timeEach(n: number, fn: (i: number) => Promise<unknown>): Promise<number> {
  const t = process.hrtime.bigint();
  for (let i = 0; i < n; i++) await fn(i);
  return Number(process.hrtime.bigint() - t) / 1e6 / n;
}

export async function foldersFs(): Promise<void> {
  const tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'hostd-bench-folders-'));
  try {
    const root = path.join(tmp, 'root');
    const dir = path.join(root, 'a', 'b');
    await fs.mkdir(dir, { recursive: true });
    for (let i = 0; i < ENTRIES; i++) await fs.writeFile(path.join(dir, `file-${i}.txt`), 'x'.repeat(i));
    const drv = new LocalFiles();

    const plainList = async () => {
      const real = await fs.realpath(path.join(root, 'a', 'b'));
      const names = await fs.readdir(real);
      return Promise.all(names.map((n) => fs.lstat(path.join(real, n))));
    };
    const fdList = () => drv.list(root, 'a/b');

    let seq = 0;
    const plainCreate = async () => {
      const real = await fs.realpath(path.join(root, 'a', 'b'));
      const p = path.join(real, `p-${seq++}`);
      await fs.mkdir(p);
      return fs.lstat(p);
    };
    const fdCreate = () => drv.mkdir(root, `a/b/d-${seq++}`);

    // Warm up both, then alternate rounds so that both see the same machine load.
    await timeEach(20, plainList);
    await timeEach(20, fdList);
    const list = { plain: [] as number[], fd: [] as number[] };
    const create = { plain: [] as number[], fd: [] as number[] };
    for (let r = 0; r < ROUNDS; r++) {
      list.plain.push(await timeEach(PER_ROUND, plainList));
      list.fd.push(await timeEach(PER_ROUND, fdList));
      create.plain.push(await timeEach(PER_ROUND, plainCreate));
      create.fd.push(await timeEach(PER_ROUND, fdCreate));
    }
    print('folders_list_200_plain_ms', median(list.plain));
    print('folders_list_200_fd_ms', median(list.fd));
    print('folders_list_fd_over_plain', median(list.fd) / median(list.plain), 2);
    print('folders_create_plain_ms', median(create.plain));
    print('folders_create_fd_ms', median(create.fd));
    print('folders_create_fd_over_plain', median(create.fd) / median(create.plain), 2);
  } finally {
    await fs.rm(tmp, { recursive: true, force: true });
  }
}
