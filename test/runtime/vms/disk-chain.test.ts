/**
 * Backing chains are confined (daemon/vms/qemu/img.ts confinedChain) against
 * real qemu-img: a qcow2 may name any backing file, and QEMU, qemu-img convert
 * and qemu-storage-daemon follow it, so hostd walks each chain one layer at a
 * time and refuses a layer outside the pools' VM directories before anything
 * opens it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { expect } from 'chai';
import { run } from '../../../daemon/lib/run.js';
import { qemuDriver } from '../../../daemon/vms/qemu/index.js';
import { requireRuntime } from '../../helpers/runtime-gate.js';
import { ChainCache, confinedChain, DiskChainEscape } from '../../../daemon/vms/qemu/img.js';
import { tempDir } from '../../helpers/daemon.js';

describe('vms runtime: backing chains stay inside the pools (qemu-img)', function () {
  this.timeout(120_000);
  let dir: string;
  let root: string;
  let outside: string;

  const qcow2 = async (file: string, backing?: string, fmt = 'qcow2') => {
    const args = ['create', '-q', '-f', 'qcow2'];
    if (backing) args.push('-F', fmt, '-b', backing);
    args.push(file, '64M');
    await run('qemu-img', args, { timeoutMs: 30_000 });
  };

  const escapes = async (file: string, roots: string[], opts = {}): Promise<string> => {
    try {
      await confinedChain(file, roots, opts);
    } catch (err) {
      expect(err).to.be.instanceOf(DiskChainEscape);
      return (err as Error).message;
    }
    throw new Error(`${file} was not refused`);
  };

  before(async function () {
    await requireRuntime(this, 'vms', qemuDriver({ diskRoots: [] }), { need: ['qemu-img'] });
    dir = tempDir('hostd-chain-');
    root = path.join(dir, 'pool', '.vms');
    outside = path.join(dir, 'outside');
    fs.mkdirSync(path.join(root, 'images'), { recursive: true });
    fs.mkdirSync(outside, { recursive: true });
  });

  after(() => {
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('walks a chain inside the roots, top first', async () => {
    const base = path.join(root, 'images', 'base.qcow2');
    const mid = path.join(root, 'vm-1', 'root.qcow2');
    const top = path.join(root, 'vm-1', 'root.a1.qcow2');
    fs.mkdirSync(path.dirname(mid), { recursive: true });
    await qcow2(base);
    await qcow2(mid, base);
    await qcow2(top, mid);
    const chain = await confinedChain(top, [root]);
    expect(chain.map((c) => c.backingFile)).to.deep.equal([mid, base, null]);
  });

  it('refuses a backing file outside the roots before anything opens it, also through a symlink inside', async () => {
    const secret = path.join(outside, 'host-file');
    fs.writeFileSync(secret, 'not a disk\n');
    const evil = path.join(root, 'images', 'evil.qcow2');
    await qcow2(evil, secret, 'raw');
    expect(await escapes(evil, [root])).to.equal(
      `backing file '${secret}' of ${evil} is outside the storage pools' VM directories (hostd opens no disk elsewhere)`,
    );
    const link = path.join(root, 'images', 'link.qcow2');
    fs.symlinkSync(secret, link);
    const viaLink = path.join(root, 'images', 'via-link.qcow2');
    await qcow2(viaLink, link, 'raw');
    expect(await escapes(viaLink, [root])).to.equal(
      `backing file '${link}' of ${viaLink} is outside the storage pools' VM directories (hostd opens no disk elsewhere)`,
    );
    // The top itself, unless the caller allows it (an operator's import), must be inside too.
    const imported = path.join(outside, 'import.qcow2');
    await qcow2(imported);
    expect(await escapes(imported, [root])).to.match(/^disk '.*import\.qcow2' of .* is outside/);
    expect((await confinedChain(imported, [root], { topAnywhere: true })).length).to.equal(1);
    const importedOverlay = path.join(outside, 'overlay.qcow2');
    await qcow2(importedOverlay, imported);
    expect(await escapes(importedOverlay, [root], { topAnywhere: true })).to.match(/^backing file '.*import\.qcow2' of .*overlay\.qcow2 is outside/);
  });

  it('reuses what it read of an unchanged layer, and sees a layer rewritten since', async () => {
    const base = path.join(root, 'images', 'c-base.qcow2');
    const mid = path.join(root, 'images', 'c-mid.qcow2');
    const top = path.join(root, 'images', 'c-top.qcow2');
    await qcow2(base);
    await qcow2(mid, base);
    await qcow2(top, mid);
    const cache = new ChainCache();
    expect((await confinedChain(top, [root], { cache })).map((c) => c.backingFile)).to.deep.equal([mid, base, null]);
    const secret = path.join(outside, 'host-file-3');
    fs.writeFileSync(secret, 'y');
    // The middle layer now rests on a host file (its header rewritten in place).
    await run('qemu-img', ['rebase', '-u', '-F', 'raw', '-b', secret, mid], { timeoutMs: 30_000 });
    let msg = '';
    try {
      await confinedChain(top, [root], { cache });
    } catch (err) {
      msg = (err as Error).message;
    }
    expect(msg).to.equal(`backing file '${secret}' of ${top} is outside the storage pools' VM directories (hostd opens no disk elsewhere)`);
  });

  it('refuses json: and protocol backing names, and a raw layer inside the chain', async () => {
    const secret = path.join(outside, 'host-file-2');
    fs.writeFileSync(secret, 'x');
    const json = path.join(root, 'images', 'json.qcow2');
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-u', '-F', 'raw', '-b', `json:{"driver":"file","filename":"${secret}"}`, json, '64M'], {
      timeoutMs: 30_000,
    });
    expect(await escapes(json, [root])).to.match(/names a backing file 'json:\{.*' that is not a plain absolute path$/);
    const nbd = path.join(root, 'images', 'nbd.qcow2');
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-u', '-F', 'raw', '-b', 'nbd://127.0.0.1:1/x', nbd, '64M'], { timeoutMs: 30_000 });
    expect(await escapes(nbd, [root])).to.match(/names a backing file 'nbd:\/\/127\.0\.0\.1:1\/x' that is not a plain absolute path$/);
    const raw = path.join(root, 'images', 'raw.img');
    fs.writeFileSync(raw, Buffer.alloc(1024 * 1024));
    const onRaw = path.join(root, 'images', 'on-raw.qcow2');
    await qcow2(onRaw, raw, 'raw');
    expect(await escapes(onRaw, [root])).to.equal(`backing file '${raw}' of ${onRaw} is raw, not qcow2`);
  });
});
