// mocha's spec reporter plus one plain closing line, `tests: N passed, N failed, N skipped`,
// which CI reads whatever the test runner; before it, every skipped test by its full title,
// so that a skip is never only a number. A failure's message is also printed where it happens
// (the spec reporter keeps them for the end), so that a cut or stopped log still says why.
const Mocha = require('mocha');

const { Spec } = Mocha.reporters;
const { EVENT_RUN_END, EVENT_TEST_FAIL, EVENT_TEST_PENDING } = Mocha.Runner.constants;

class SpecWithSummary extends Spec {
  constructor(runner, options) {
    super(runner, options);
    const skipped = [];
    runner.on(EVENT_TEST_PENDING, (test) => skipped.push(test.fullTitle()));
    runner.on(EVENT_TEST_FAIL, (_test, err) => {
      const first = String((err && err.message) || err)
        .split('\n')[0]
        .slice(0, 400);
      process.stdout.write(`      failed: ${first}\n`);
    });
    runner.once(EVENT_RUN_END, () => {
      const s = runner.stats;
      for (const t of skipped) process.stdout.write(`skipped: ${t}\n`);
      process.stdout.write(`tests: ${s.passes} passed, ${s.failures} failed, ${s.pending} skipped\n`);
    });
  }
}

module.exports = SpecWithSummary;
