// mocha's spec reporter plus one plain closing line, `tests: N passed, N failed, N skipped`,
// which CI reads whatever the test runner; before it, every skipped test by its full title,
// so that a skip is never only a number. A failure's message is also printed where it happens
// (the spec reporter keeps them for the end), so that a cut or stopped log still says why.
// At the end, the slowest files by wall time (hooks included), so that each run says where
// the suite's time goes.
const path = require('node:path');
const Mocha = require('mocha');

const { Spec } = Mocha.reporters;
const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END, EVENT_TEST_FAIL, EVENT_TEST_PENDING } = Mocha.Runner.constants;
const SLOWEST = 15;
const fs = require('node:fs');

/** CPU seconds of every process of this mocha run so far (bin/test-suite.js's cgroup), or undefined. */
function groupCpu() {
  const dir = process.env.HOSTD_TEST_CPUACCT;
  if (!dir) return undefined;
  try {
    return Number(fs.readFileSync(`${dir}/cpuacct.usage`, 'utf8')) / 1e9;
  } catch {
    return undefined;
  }
}

class SpecWithSummary extends Spec {
  constructor(runner, options) {
    super(runner, options);
    const skipped = [];
    runner.on(EVENT_TEST_PENDING, (test) => skipped.push(test.fullTitle()));
    // A file's time: from its first top-level suite's start to its last one's end, hooks included.
    // Its CPU, where the runner counts it: every process the group started, guests included.
    const fileMs = new Map();
    const fileCpu = new Map();
    const began = new Map();
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (suite.file && suite.parent && suite.parent.root) began.set(suite, { at: Date.now(), cpu: groupCpu() });
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      const b = began.get(suite);
      if (b === undefined) return;
      const f = path.relative(process.cwd(), suite.file);
      fileMs.set(f, (fileMs.get(f) || 0) + Date.now() - b.at);
      const cpu = groupCpu();
      if (cpu !== undefined && b.cpu !== undefined) fileCpu.set(f, (fileCpu.get(f) || 0) + cpu - b.cpu);
    });
    runner.on(EVENT_TEST_FAIL, (_test, err) => {
      const first = String((err && err.message) || err)
        .split('\n')[0]
        .slice(0, 400);
      process.stdout.write(`      failed: ${first}\n`);
    });
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats;
      const slow = [...fileMs].sort((a, b) => b[1] - a[1]).slice(0, SLOWEST);
      for (const [f, ms] of slow) {
        const cpu = fileCpu.has(f) ? `  ${fileCpu.get(f).toFixed(1).padStart(7)} CPU-s` : '';
        process.stdout.write(`slowest: ${(ms / 1000).toFixed(1).padStart(7)} s${cpu}  ${f}\n`);
      }
      for (const t of skipped) process.stdout.write(`skipped: ${t}\n`);
      process.stdout.write(`tests: ${s.passes} passed, ${s.failures} failed, ${s.pending} skipped\n`);
    });
  }
}

module.exports = SpecWithSummary;
