// Every YAML config example in docs/gateway.md is a valid config: the reference must not show fields or values the gateway refuses.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { exampleJwks } from '../support/example-jwks.js';

test('the YAML examples of docs/gateway.md load as configs', async () => {
  const doc = readFileSync(new URL('../../../docs/gateway.md', import.meta.url), 'utf8');
  const blocks = [...doc.matchAll(/```yaml\n([\s\S]*?)```/g)].map((m) => m[1]!);
  assert.ok(blocks.length >= 2, 'the reference has its config examples');
  // The examples name an allow-list file beside the config.
  const dir = mkdtempSync(join(tmpdir(), 'floodgate-docs-'));
  writeFileSync(join(dir, 'api-keys.txt'), 'example-key-0123456789abcdef\n');
  // And the admin API's token file.
  writeFileSync(join(dir, 'admin-token'), 'example-admin-token-0123456789abcdef\n');
  // And the key set that verifies bearer tokens for jwt:CLAIM keys.
  writeFileSync(join(dir, 'jwks.json'), exampleJwks());
  for (const [i, yaml] of blocks.entries()) {
    await assert.doesNotReject(parseConfigText(yaml, join(dir, `example-${i}.yaml`)), `example ${i + 1}:\n${yaml}`);
  }
});
