/** `floodgate serve` from the run's copy of dist/, as a process of its own: the gateway benchmark's `--workers` variant runs it (its workers are forks of this file). */
import { importDist } from '../lib/serve.js';

type Cli = typeof import('../../dist/esm/gateway/cli/cli.js');

const cli = await importDist<Cli>('esm/gateway/cli/cli.js', 'the gateway CLI (src/gateway/cli)');
const code = await cli.main(process.argv.slice(2));
if (code !== 0) process.exit(code);
