/** The bench CLI's command line: --open-loop's rates (a bad value refused as a usage error, exit 2, not run), --phases. */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseOptions, USAGE, type Options } from '../../bench/cli/options.js';
import { UsageError } from '../../bench/lib/errors.js';

function parse(...argv: string[]): Options {
  const options = parseOptions(argv);
  assert.notEqual(options, 'help');
  return options as Options;
}

describe('bench options', () => {
  it('--open-loop takes a comma-separated list of requests/s, in the order given, each once', () => {
    assert.deepEqual(parse('forwarding', '--open-loop', '16000').openLoopRates, [16000]);
    assert.deepEqual(parse('forwarding', '--open-loop', '16000, 8000,16000').openLoopRates, [16000, 8000]);
  });

  it('without --open-loop the scenario keeps its shares (no rates)', () => {
    assert.equal(parse('forwarding').openLoopRates, undefined);
  });

  for (const bad of ['', 'fast', '0', '-1', '1.5', '1e4', '16000,', '16000,,8000', '99999999999999999999']) {
    it(`--open-loop ${JSON.stringify(bad)} is a UsageError`, () => {
      assert.throws(
        () => parseOptions(['forwarding', `--open-loop=${bad}`]),
        (error: unknown) => {
          assert.ok(error instanceof UsageError);
          assert.match(error.message, /--open-loop takes requests\/s/);
          return true;
        },
      );
    });
  }

  it('--phases lists the parts of a scenario that runs itself; --duration and --warmup are told apart from their defaults', () => {
    const options = parse('overload', '--phases', 'a, c', '--duration', '5');
    assert.deepEqual(options.phases, ['a', 'c']);
    assert.deepEqual(options.given, { duration: 5, warmup: undefined });
    assert.equal(options.durationS, 5);
    assert.equal(parse('overload').phases, undefined);
  });

  it('the usage text lists --open-loop', () => {
    assert.match(USAGE, /--open-loop RPS\[,RPS\.\.\.\]/);
  });
});
