/** BenchError: a failure the harness expected and explained, printed without a stack trace. */

/** An error whose message says everything (what is missing, what to run); the CLI prints only the message. */
export class BenchError extends Error {
  override name = 'BenchError';
}
