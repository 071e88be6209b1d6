/** The scenarios the CLI knows: every bench/scenarios/*.ts, loaded and checked, and their listing for `npm run bench` without a scenario. */
import { existsSync, readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { BenchError } from '../lib/errors.js';
import type { Scenario } from '../types.js';
import { USAGE } from './options.js';

const SCENARIO_DIR = fileURLToPath(new URL('../scenarios/', import.meta.url));

/** Loads and checks every bench/scenarios/*.ts, sorted by name. */
export async function loadScenarios(): Promise<Scenario[]> {
  const files = readdirSync(SCENARIO_DIR)
    .filter((file) => file.endsWith('.ts') && !file.endsWith('.d.ts'))
    .sort();
  const scenarios: Scenario[] = [];
  for (const file of files) {
    const module = (await import(pathToFileURL(join(SCENARIO_DIR, file)).href)) as { default?: Scenario };
    scenarios.push(checkScenario(module.default, basename(file, '.ts')));
  }
  return scenarios;
}

function checkScenario(scenario: Scenario | undefined, fileName: string): Scenario {
  const where = `bench/scenarios/${fileName}.ts`;
  if (!scenario || typeof scenario !== 'object') throw new BenchError(`${where} must export default a Scenario (see bench/README.md)`);
  if (scenario.name !== fileName) throw new BenchError(`${where}: name is ${JSON.stringify(scenario.name)}; it must equal the file name`);
  if (!Array.isArray(scenario.variants) || scenario.variants.length === 0)
    throw new BenchError(`${where}: variants must be a non-empty array`);
  const seen = new Set<string>();
  for (const variant of scenario.variants) {
    if (seen.has(variant.name)) throw new BenchError(`${where}: variant ${variant.name} appears twice`);
    seen.add(variant.name);
    if (!existsSync(variant.server)) throw new BenchError(`${where}: variant ${variant.name}: server ${variant.server} does not exist`);
  }
  return scenario;
}

/** The usage, then each scenario with its variants and their descriptions: what `npm run bench` alone prints. */
export function listScenarios(scenarios: readonly Scenario[]): string {
  const lines = [USAGE, '', 'scenarios:'];
  for (const scenario of scenarios) {
    lines.push(`  ${scenario.name}  ${scenario.description}`);
    const width = Math.max(...scenario.variants.map((v) => v.name.length));
    for (const variant of scenario.variants) lines.push(`      ${variant.name.padEnd(width)}  ${variant.description ?? ''}`);
  }
  lines.push('  all  every scenario above, one after the other');
  return `${lines.join('\n')}\n`;
}
