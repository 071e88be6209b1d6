// docs/gateway.md "Keys from the request": `floodgate check` passes each of its YAML examples, and warns of unverified claims.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { test } from 'node:test';
import { exampleJwks } from '../support/example-jwks.js';
import { runCli, writeTemp } from '../support/harness.js';

test('floodgate check passes every YAML example of "Keys from the request", warning of unverified claims', async () => {
  const doc = readFileSync(new URL('../../../docs/gateway.md', import.meta.url), 'utf8');
  const section = doc.slice(doc.indexOf('### Keys from the request'), doc.indexOf('### Key tables'));
  const blocks = [...section.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);
  assert.equal(blocks.length, 2, 'a verified and an unverified example');
  const dir = dirname(writeTemp('jwks.json', exampleJwks()));
  for (const [i, yaml] of blocks.entries()) {
    const file = join(dir, `keys-${i}.yaml`);
    writeFileSync(file, `upstream: http://127.0.0.1:9\n${yaml}`);
    const cli = runCli(['check', '--config', file]);
    assert.equal(await cli.exited, 0, cli.stderr());
    assert.match(cli.text.join('\n'), /valid; \d rule\(s\)/);
    const warned = /warning: .*dangerouslyUseUnverifiedClaims.* \[FLOODGATE_UNVERIFIED_JWT_CLAIMS\]/.test(cli.stderr());
    assert.equal(warned, yaml.includes('dangerouslyUseUnverifiedClaims'), cli.stderr());
  }
});
