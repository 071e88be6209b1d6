/** The harness's progress messages: to stderr, so that --json leaves stdout to the JSON alone. */

/** Writes one line for people to stderr. */
export const log = (message: string): void => void process.stderr.write(`${message}\n`);
