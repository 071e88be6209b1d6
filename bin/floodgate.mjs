#!/usr/bin/env node
// The `floodgate` command (floodgate serve …): runs the gateway CLI from the built package.
import { main } from '../dist/esm/gateway/cli/cli.js';

main(process.argv.slice(2)).then((code) => {
  // serve resolves once listening and keeps running; only the other commands end here.
  if (code !== 0) process.exit(code);
});
