// `floodgate check` reported one error per run: a file with five mistakes took five runs. Each independent one is listed now.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { ErrorCode } from '../../../src/core/errors.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { ConfigError, ConfigErrors } from '../../../src/gateway/config/config-error.js';
import { runCli } from '../support/harness.js';

const dir = mkdtempSync(join(tmpdir(), 'floodgate-check-'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** Five mistakes in five places, none of which follows from another. */
const FIVE_MISTAKES = `upstream: http://127.0.0.1:3000
listen: 127.0.0.1:notaport
drainTimeout: forever
colour: blue
rules:
  - name: api
    policies: ["3/5parsecs"]
  - name: login
    policies: ["5/1m"]
    shadwo: true
  - name: fine
    policies: ["10/1s"]
`;

/** Runs `floodgate check --config` on `yaml` as a user would, resolving to the exit code and stderr. */
async function check(name: string, yaml: string): Promise<{ code: number | string; stderr: string; stdout: string }> {
  const file = join(dir, name);
  writeFileSync(file, yaml);
  const cli = runCli(['check', '--config', file]);
  const code = await cli.exited;
  return { code, stderr: cli.stderr(), stdout: cli.text.join('\n') };
}

describe('floodgate check reports every error in a file, not one per run', () => {
  it('five independent mistakes: one run lists all five, each with its line and field, in file order, exit 2', async () => {
    const { code, stderr } = await check('five.yaml', FIVE_MISTAKES);
    assert.equal(code, 2, stderr);
    const file = join(dir, 'five.yaml');
    const lines = stderr.trim().split('\n');
    assert.equal(lines[0], `floodgate: ${file}: 5 problems [${ErrorCode.INVALID_CONFIG}]`, stderr);
    const listed = lines.slice(1).map((l) => l.trim());
    assert.equal(listed.length, 5, stderr);
    assert.match(listed[0]!, new RegExp(`^${file}:2:9: listen: `));
    assert.match(listed[1]!, new RegExp(`^${file}:3:15: drainTimeout: `));
    assert.match(listed[2]!, new RegExp(`^${file}:4:1: colour: unknown field "colour"`));
    assert.match(listed[3]!, new RegExp(`^${file}:7:16: rules\\[0\\]\\.policies\\[0\\]: `));
    assert.match(listed[4]!, new RegExp(`^${file}:10:5: rules\\[1\\]\\.shadwo: unknown field "shadwo"`));
  });

  it('a misspelt field inside one rule and a bad policy in another are both reported', async () => {
    const yaml = FIVE_MISTAKES.replace('listen: 127.0.0.1:notaport\n', '')
      .replace('drainTimeout: forever\n', '')
      .replace('colour: blue\n', '');
    const { code, stderr } = await check('rules.yaml', yaml);
    assert.equal(code, 2, stderr);
    assert.match(stderr, /2 problems/);
    assert.match(stderr, /rules\[0\]\.policies\[0\]: /);
    assert.match(stderr, /rules\[1\]\.shadwo: unknown field "shadwo"/);
  });

  it('one mistake is reported as before: the ConfigError itself, with its line and field', async () => {
    await assert.rejects(parseConfigText('upstream: http://127.0.0.1:3000\nlisten: nope\nrules: []\n', 'gw.yaml'), (e: unknown) => {
      assert.ok(e instanceof ConfigError && !(e instanceof ConfigErrors), String(e));
      assert.equal(e.line, 2);
      assert.equal(e.field, 'listen');
      return true;
    });
  });

  it('a check across fields is left out after a field it reads was refused (its stand-in would make it up)', async () => {
    // upstream is refused; concurrency "needs an upstream" would follow from the refusal, not from the file.
    const yaml = 'upstream: ftp://x\nrules:\n  - name: a\n    policies: ["1/1s"]\n    concurrency: 2\n';
    await assert.rejects(parseConfigText(yaml, 'gw.yaml'), (e: unknown) => {
      assert.ok(e instanceof ConfigError && !(e instanceof ConfigErrors), String(e));
      assert.equal(e.field, 'upstream');
      return true;
    });
  });

  it('a valid file still passes', async () => {
    const { code, stdout, stderr } = await check(
      'ok.yaml',
      'upstream: http://127.0.0.1:3000\nrules:\n  - name: api\n    policies: ["3/5s"]\n',
    );
    assert.equal(code, 0, stderr);
    assert.match(stdout, /valid; 1 rule\(s\): api/);
  });
});
