/** The harness's expected failures: BenchError, printed without a stack trace, and UsageError, a bad command line. */

/** An error whose message says everything (what is missing, what to run); the CLI prints only the message. */
export class BenchError extends Error {
  override name = 'BenchError';
}

/** A bad command line: the message and the usage are printed, exit code 2. */
export class UsageError extends BenchError {}
