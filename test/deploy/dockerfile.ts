// Reads a Dockerfile into stages of instructions, for the tests that replay its build outside a container and check its rules.
import { readFileSync } from 'node:fs';

/** One instruction: its keyword in capitals, its flags (`--from=build`) and the rest of the line. */
export interface Instruction {
  keyword: string;
  flags: Record<string, string>;
  args: string;
  line: number;
}

/** A stage: its base image, its `AS` name (if any) and its instructions after FROM. */
export interface Stage {
  image: string;
  name: string | undefined;
  instructions: Instruction[];
}

/**
 * Parses a Dockerfile: joins `\`-continued lines, drops comments, splits
 * stages at FROM. Enough for the files this repository writes; not the whole
 * grammar (no heredocs, no escape directive).
 */
export function parseDockerfile(path: string): Stage[] {
  const stages: Stage[] = [];
  const lines = readFileSync(path, 'utf8').split('\n');
  let pending = '';
  let start = 0;
  lines.forEach((raw, index) => {
    const trimmed = raw.trim();
    if (pending === '' && (trimmed === '' || trimmed.startsWith('#'))) return;
    if (pending !== '' && trimmed.startsWith('#')) return;
    if (pending === '') start = index + 1;
    if (trimmed.endsWith('\\')) {
      pending += `${trimmed.slice(0, -1).trim()} `;
      return;
    }
    const text = pending + trimmed;
    pending = '';
    const instruction = parseLine(text, start);
    if (instruction.keyword === 'FROM') {
      const [image, as, name] = instruction.args.split(/\s+/);
      if (image === undefined) throw new Error(`${path}:${start}: FROM without an image`);
      stages.push({ image, name: as?.toUpperCase() === 'AS' ? name : undefined, instructions: [] });
      return;
    }
    const stage = stages.at(-1);
    if (stage === undefined) throw new Error(`${path}:${start}: ${instruction.keyword} before FROM`);
    stage.instructions.push(instruction);
  });
  return stages;
}

function parseLine(text: string, line: number): Instruction {
  const match = /^(\S+)\s*(.*)$/.exec(text);
  if (match === null) throw new Error(`line ${line}: cannot read ${JSON.stringify(text)}`);
  let rest = match[2]!;
  const flags: Record<string, string> = {};
  for (;;) {
    const flag = /^--([a-z-]+)=(\S+)\s*/.exec(rest);
    if (flag === null) break;
    flags[flag[1]!] = flag[2]!;
    rest = rest.slice(flag[0].length);
  }
  return { keyword: match[1]!.toUpperCase(), flags, args: rest, line };
}

/** The JSON array of an exec-form instruction (`["floodgate", "serve"]`), or undefined for the shell form. */
export function execForm(args: string): string[] | undefined {
  if (!args.trimStart().startsWith('[')) return undefined;
  const parsed: unknown = JSON.parse(args);
  if (!Array.isArray(parsed) || !parsed.every((part) => typeof part === 'string')) throw new Error(`not a JSON string array: ${args}`);
  return parsed as string[];
}

/** The `KEY=value` pairs of an ENV instruction (values without spaces or quotes, as this repository writes them). */
export function envPairs(args: string): [string, string][] {
  return args
    .split(/\s+/)
    .filter((pair) => pair !== '')
    .map((pair) => {
      const eq = pair.indexOf('=');
      if (eq < 1) throw new Error(`ENV ${args}: write KEY=value pairs`);
      return [pair.slice(0, eq), pair.slice(eq + 1)];
    });
}

/** Splits HEALTHCHECK's options from its command: `--interval=10s … CMD [...]`. */
export function healthcheckCommand(args: string): string[] | undefined {
  const at = args.indexOf('CMD');
  return at < 0 ? undefined : execForm(args.slice(at + 3).trim());
}
