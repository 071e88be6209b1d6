/** Entry point that runs the CLI with this process's arguments. */
/**
 * Usage: `node --import tsx src/gateway/cli/run.ts serve …`; the package's bin does the same from dist/.
 */
import { main } from './cli.js';

void main(process.argv.slice(2)).then((code) => {
  // serve resolves once listening and keeps running; only the other commands end here.
  if (code !== 0) process.exit(code);
});
