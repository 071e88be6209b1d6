// `npm test`: makes sure redis-server, PostgreSQL, nginx, chromium and the deploy validators are installed (installing them when it may), builds, then runs every test/**/*.test.ts.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureGhz, ensureNode22, ensureTestPrograms } from './test-prereqs.mjs';
import { testFiles, unitTestFiles } from './unit-tests.mjs';
import { findTools, installTools } from './validate-deploy.mjs';

const root = fileURLToPath(new URL('..', import.meta.url));

// `--unit`: only the tests that start no program besides node (scripts/unit-tests.mjs), so nothing needs installing.
const unit = process.argv.includes('--unit');
if (!unit) {
  ensureTestPrograms();
  ensureNode22();
  ensureGhz();
}
// test/deploy checks the manifests with kubeconform and hadolint: a fresh machine gets them here (into the user's
// cache directory, kept between runs), so that `npm ci && npm test` passes by itself.
if (!unit && process.env.FLOODGATE_TEST_NO_INSTALL !== '1') {
  const tools = findTools();
  if (tools.kubeconform === undefined || tools.hadolint === undefined || tools.schemas === undefined) installTools();
}

execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: root, stdio: 'inherit' });

const only = process.argv.slice(2).filter((arg) => arg !== '--unit');
const files = only.length > 0 ? only : unit ? unitTestFiles(join(root, 'test')) : testFiles(join(root, 'test')).sort();
// A second copy of the report goes to a file, so that a failure's diagnostics can be repeated at the end,
// where a CI log excerpt (its tail) shows them.
const reportDir = mkdtempSync(join(tmpdir(), 'floodgate-test-report-'));
const reportFile = join(reportDir, 'spec.txt');
const result = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    '--test-concurrency=3',
    '--test-timeout=300000',
    '--test-reporter=spec',
    '--test-reporter-destination=stdout',
    '--test-reporter=spec',
    `--test-reporter-destination=${reportFile}`,
    ...files,
  ],
  { cwd: root, stdio: 'inherit', env: { ...process.env, FLOODGATE_TEST: '1' } },
);
if (result.status !== 0) {
  try {
    console.log(failureContext(readFileSync(reportFile, 'utf8')));
  } catch {
    // The report is a convenience; the exit status below is what counts.
  }
}
rmSync(reportDir, { recursive: true, force: true });
process.exit(result.status ?? 1);

/**
 * A file that fails only at file level ("'test failed'": a late error, a non-zero exit) is explained by a
 * diagnostic printed just before it, far above the summary. Repeats the runner's diagnostics and the
 * lines before each such failure.
 */
function failureContext(report) {
  const lines = report.split('\n');
  const counters = /^ℹ (tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) /;
  const out = ['', 'Diagnostics from this run (repeated from above):'];
  for (const line of lines) if (line.startsWith('ℹ ') && !counters.test(line)) out.push(`  ${line}`);
  const summary = lines.findIndex((line) => line.startsWith('✖ failing tests:'));
  lines.forEach((line, i) => {
    if ((summary < 0 || i < summary) && /^✖ \S+\.test\.ts \(/.test(line)) {
      out.push('', `Lines before ${line.slice(2)}:`, ...lines.slice(Math.max(0, i - 15), i + 2).map((l) => `  ${l}`));
    }
  });
  return out.join('\n');
}
