#!/usr/bin/env node
// Runs the compiled test suite as two mocha processes side by side: the files
// that boot QEMU guests (TCG, a core each while they boot) in one, every
// other file in the other. Run one after the other the two take about 50
// minutes on two cores; most of the guests' time is one core busy and the
// other idle, so the rest of the suite fits beside them. Each group keeps its
// files in mocha's order and its own root hooks (the shared VM and sandbox
// daemons live in the guests group's process), and each is the other's busy
// neighbour, which the suite must stand anyway.
//
// Output: every line of a group prefixed with its name, as it comes, so that
// a cut log still says where each group was; then the skipped tests and one
// closing line, `tests: N passed, N failed, N skipped`, over both groups (the
// line CI reads). HOSTD_TEST_JOBS=1 runs all files in one process instead.
//
// Usage: node bin/test-suite.js [--list] DIR... (directories under dist/test;
// --list prints each file with its group and runs nothing)
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const mocha = path.join(root, 'node_modules', 'mocha', 'bin', 'mocha.js');
// A test file that imports one of these helpers (directly or through another module) boots guests.
const GUEST_HELPERS = ['vms-fixture.js', 'sandboxes-fixture.js', 'vms-shared.js'].map((f) => path.join(root, 'dist', 'test', 'helpers', f));
const IMPORT = /(?:from|import)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g;

/** Whether `file` (compiled) imports a guest helper, following relative imports. */
function bootsGuests(file, seen = new Set()) {
  if (GUEST_HELPERS.includes(file)) return true;
  if (seen.has(file) || !fs.existsSync(file)) return false;
  seen.add(file);
  const text = fs.readFileSync(file, 'utf8');
  for (const m of text.matchAll(IMPORT)) if (bootsGuests(path.resolve(path.dirname(file), m[1]), seen)) return true;
  return false;
}

function testFiles(dirs) {
  const found = [];
  const walk = (dir) => {
    for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name.endsWith('.test.js')) found.push(p);
    }
  };
  for (const d of dirs) {
    const dir = path.join(root, 'dist', 'test', d);
    if (fs.existsSync(dir)) walk(dir);
  }
  // mocha's own order for a glob: by path.
  return found.sort().map((p) => path.relative(root, p));
}

function groups(files) {
  if (process.env.HOSTD_TEST_JOBS === '1') return [{ name: 'all', files }];
  const guests = files.filter((f) => bootsGuests(path.join(root, f)));
  const host = files.filter((f) => !guests.includes(f));
  return [
    { name: 'guests', files: guests },
    { name: 'host', files: host },
  ].filter((g) => g.files.length > 0);
}

const SUMMARY = /^tests: (\d+) passed, (\d+) failed, (\d+) skipped$/;

// CPU accounting per group: each mocha process in a cpuacct cgroup of its own
// (cgroup v1, as on our machines), so that the CPU of everything the group
// starts is counted, daemonized QEMU guests included (they stay in the cgroup
// of whoever started them), whatever else runs on the machine. The reporter
// prints each file's share; a cgroup that still holds processes when its group
// has ended names what a test left running. Where the hierarchy is not there or
// not writable, nothing is counted and nothing else changes.
const CPUACCT = '/sys/fs/cgroup/cpuacct';

function cpuGroup(name) {
  const dir = path.join(CPUACCT, `hostd-test-${process.pid}-${name}`);
  try {
    if (!fs.existsSync(path.join(CPUACCT, 'cpuacct.usage'))) return undefined;
    fs.mkdirSync(dir);
    return dir;
  } catch {
    return undefined;
  }
}

function cpuSeconds(dir) {
  try {
    return Number(fs.readFileSync(path.join(dir, 'cpuacct.usage'), 'utf8')) / 1e9;
  } catch {
    return undefined;
  }
}

/** The group's CPU, and what it left running; removes its cgroup when it is empty. */
function closeCpuGroup(dir) {
  const seconds = cpuSeconds(dir);
  let left = [];
  try {
    left = fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean);
  } catch {
    /* gone */
  }
  const described = left.map((pid) => {
    try {
      return `${pid} ${fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim().slice(0, 160)}`;
    } catch {
      return pid;
    }
  });
  if (left.length === 0) {
    try {
      fs.rmdirSync(dir);
    } catch {
      /* a process still on its way out */
    }
  }
  return { seconds, left: described };
}

function run(group, width) {
  const tag = `[${group.name}]`.padEnd(width + 2);
  const cg = cpuGroup(group.name);
  const child = spawn(process.execPath, [mocha, ...group.files], {
    cwd: root,
    env: { ...process.env, HOSTD_TEST_GROUP: group.name, ...(cg ? { HOSTD_TEST_CPUACCT: cg } : {}) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Moved at once, before it has started anything of its own.
  if (cg) {
    try {
      fs.writeFileSync(path.join(cg, 'cgroup.procs'), String(child.pid));
    } catch {
      /* not counted */
    }
  }
  const result = { name: group.name, child, summary: undefined, skipped: [], code: null, cg };
  for (const stream of [child.stdout, child.stderr]) {
    readline.createInterface({ input: stream, crlfDelay: Number.POSITIVE_INFINITY }).on('line', (line) => {
      const m = SUMMARY.exec(line);
      if (m) result.summary = { passed: Number(m[1]), failed: Number(m[2]), skipped: Number(m[3]) };
      else if (line.startsWith('skipped: ')) result.skipped.push(line);
      process.stdout.write(`${tag} ${line}\n`);
    });
  }
  result.done = new Promise((resolve) => {
    child.on('close', (code, signal) => {
      result.code = code ?? signal;
      resolve(result);
    });
  });
  return result;
}

const dirs = process.argv.slice(2).filter((a) => a !== '--list');
if (dirs.length === 0) {
  process.stderr.write('usage: node bin/test-suite.js DIR... (under dist/test)\n');
  process.exit(2);
}
const all = groups(testFiles(dirs));
if (process.argv.includes('--list')) {
  for (const g of all) for (const f of g.files) process.stdout.write(`${g.name} ${f}\n`);
  process.exit(0);
}
const width = Math.max(...all.map((g) => g.name.length));
for (const g of all) process.stdout.write(`[${g.name}] ${g.files.length} files\n`);
const started = Date.now();
const running = all.map((g) => run(g, width));
// A stopped run stops both groups (their after hooks clean up what they made).
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    for (const r of running) r.child.kill(sig);
  });
}
const results = await Promise.all(running.map((r) => r.done));
const total = { passed: 0, failed: 0, skipped: 0 };
let broken = false;
for (const r of results) {
  if (!r.summary) {
    process.stdout.write(`[${r.name}] ended (${r.code}) without its summary line: counted as failed\n`);
    broken = true;
    continue;
  }
  for (const k of Object.keys(total)) total[k] += r.summary[k];
  if (r.code !== 0 && r.summary.failed === 0) {
    process.stdout.write(`[${r.name}] ended with ${r.code} though no test failed: counted as failed\n`);
    broken = true;
  }
}
const minutes = ((Date.now() - started) / 60_000).toFixed(1);
for (const r of results) {
  const cpu = r.cg ? closeCpuGroup(r.cg) : undefined;
  const used = cpu?.seconds !== undefined ? `, ${(cpu.seconds / 60).toFixed(1)} CPU-minutes (every process it started)` : '';
  process.stdout.write(`[${r.name}] ${r.summary ? `${r.summary.passed} passed, ${r.summary.failed} failed` : 'no summary'}${used}\n`);
  for (const p of cpu?.left ?? []) process.stdout.write(`[${r.name}] left running after its group ended: ${p}\n`);
}
process.stdout.write(`both groups ended after ${minutes} min\n`);
for (const r of results) for (const s of r.skipped) process.stdout.write(`${s}\n`);
process.stdout.write(`tests: ${total.passed} passed, ${total.failed + (broken ? 1 : 0)} failed, ${total.skipped} skipped\n`);
process.exit(total.failed > 0 || broken ? 1 : 0);
