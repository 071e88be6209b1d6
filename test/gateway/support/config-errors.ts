// The check the gateway config tests share: YAML that parseConfigText must refuse with a ConfigError of a given code and message.
import assert from 'node:assert/strict';
import { ErrorCode } from '../../../src/core/errors.js';
import { parseConfigText } from '../../../src/gateway/config/config-file.js';
import { ConfigError } from '../../../src/gateway/config/config-error.js';

/** Asserts that `yaml` (read as gw.yaml) is refused with a {@link ConfigError} of `code` whose message matches `where`. */
export async function rejectsConfig(yaml: string, where: RegExp, code: string = ErrorCode.INVALID_CONFIG): Promise<void> {
  await assert.rejects(parseConfigText(yaml, 'gw.yaml'), (e: unknown) => {
    assert.ok(e instanceof ConfigError, String(e));
    assert.equal(e.code, code);
    assert.match(e.message, where);
    return true;
  });
}
