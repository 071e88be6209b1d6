/** Walking the parsed YAML of a config file. */
/**
 * A cursor that places each field's error at its line, and the mapping check.
 */
import type { Document, LineCounter } from 'yaml';
import { describeValue } from '../../core/describe-value.js';
import { ErrorCode, FloodgateError } from '../../index.js';
import { InvalidValue } from './values.js';
import { ConfigError, ConfigErrors } from './config-error.js';
import { loadYaml } from '../runtime/optional-deps.js';

/**
 * Parses a config file's YAML text (duplicate keys refused, lines counted)
 * into its value and a cursor that places errors in it.
 * @throws ConfigError CONFIG_SYNTAX at the first syntax error's line and column
 */
export async function readYaml(text: string, file: string): Promise<{ cursor: Cursor; value: unknown }> {
  const yaml = await loadYaml();
  const lines = new yaml.LineCounter();
  const doc = yaml.parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false });
  const problem = doc.errors[0];
  if (problem !== undefined) {
    const pos = lines.linePos(problem.pos[0]);
    throw new ConfigError(
      ErrorCode.CONFIG_SYNTAX,
      { file, line: pos.line, column: pos.col },
      `not valid YAML: ${problem.message.split('\n')[0]}`,
      problem,
    );
  }
  return { cursor: new Cursor(file, doc, lines, yaml), value: doc.toJS() };
}

/** A field's path in the config: keys and list indexes. */
export type Path = ReadonlyArray<string | number>;

/** Walks a parsed value, knowing how to place each path in the file. */
export class Cursor {
  /** The problems kept while {@link collect} runs; undefined outside it, where every problem throws at once. */
  private kept: ConfigError[] | undefined;
  /** A kept problem left a stand-in value that a later check across fields could misread. */
  private guessed = false;

  constructor(
    private readonly file: string,
    private readonly doc: Document.Parsed,
    private readonly lines: LineCounter,
    private readonly yaml: typeof import('yaml'),
  ) {}

  /** Throws INVALID_CONFIG placed at `path` (its value, or the nearest part of it that exists). */
  fail(path: Path, message: string, cause?: unknown, atKey = false): never {
    const offset = this.offsetOf(path, atKey);
    const pos = offset === undefined ? undefined : this.lines.linePos(offset);
    throw new ConfigError(
      ErrorCode.INVALID_CONFIG,
      { file: this.file, line: pos?.line, column: pos?.col, field: fieldName(path) },
      message,
      cause,
    );
  }

  /**
   * Runs `validate` keeping each problem that {@link keep} or {@link report} meets instead of stopping at the
   * first, so a file's independent mistakes are reported in one run. Throws the one problem, or a
   * {@link ConfigErrors} of them all in file order. The problem that ends `validate` joins them unless an
   * earlier one left a stand-in value (it may follow from the stand-in, not from the file).
   */
  collect<T>(validate: () => T): T {
    const outer = { kept: this.kept, guessed: this.guessed };
    const kept: ConfigError[] = [];
    this.kept = kept;
    this.guessed = false;
    try {
      let result: T | undefined;
      try {
        result = validate();
      } catch (error) {
        if (!(error instanceof ConfigError) || kept.length === 0) throw error;
        if (!this.guessed) kept.push(error);
      }
      if (kept.length === 1) throw kept[0]!;
      if (kept.length > 1) {
        const place = (e: ConfigError): number => (e.line ?? Number.MAX_SAFE_INTEGER) * 1e6 + (e.column ?? 0);
        throw new ConfigErrors(
          this.file,
          [...kept].sort((a, b) => place(a) - place(b)),
        );
      }
      return result as T;
    } finally {
      this.kept = outer.kept;
      this.guessed = outer.guessed;
    }
  }

  /**
   * Runs `parse` for one part of the file that later parts do not depend on. Inside {@link collect} a
   * ConfigError it throws is kept and `fallback` returned; `dropsOnly` says the fallback only leaves the
   * part out (a rule), which no later check can misread. Outside collect, the error throws.
   */
  keep<T>(parse: () => T, fallback: T, dropsOnly = false): T {
    if (this.kept === undefined) return parse();
    try {
      return parse();
    } catch (error) {
      if (!(error instanceof ConfigError)) throw error;
      this.kept.push(error);
      if (!dropsOnly) this.guessed = true;
      return fallback;
    }
  }

  /** {@link fail}, except that inside {@link collect} the problem is kept and the walk goes on (e.g. an unknown field, ignored). */
  report(path: Path, message: string, atKey = false): void {
    this.keep(() => this.fail(path, message, undefined, atKey), undefined, true);
  }

  /** The 1-based line where `path` starts in the file (its value, or the nearest part of it that exists). */
  lineOf(path: Path): number | undefined {
    const offset = this.offsetOf(path, false);
    return offset === undefined ? undefined : this.lines.linePos(offset).line;
  }

  /** Runs `parse`; an InvalidValue or FloodgateError it throws is placed at `path`. */
  at<T>(path: Path, parse: () => T): T {
    try {
      return parse();
    } catch (error) {
      if (error instanceof InvalidValue || (error instanceof FloodgateError && !(error instanceof ConfigError))) {
        this.fail(path, error.message, error);
      }
      throw error;
    }
  }

  /** Where `path` starts in the file: its value, or its key when `atKey` (for fields that should not be there at all). */
  private offsetOf(path: Path, atKey: boolean): number | undefined {
    const { isMap, isSeq, isScalar } = this.yaml;
    let node: unknown = this.doc.contents;
    let offset: number | undefined = rangeStart(node);
    for (const [i, segment] of path.entries()) {
      if (isMap(node)) {
        const pair = node.items.find((p) => isScalar(p.key) && p.key.value === segment);
        if (pair === undefined) return offset;
        offset = rangeStart(pair.key) ?? offset;
        if (atKey && i === path.length - 1) return offset;
        node = pair.value;
        offset = rangeStart(node) ?? offset;
      } else if (isSeq(node) && typeof segment === 'number') {
        node = node.items[segment];
        offset = rangeStart(node) ?? offset;
      } else {
        return offset;
      }
    }
    return offset;
  }
}

function rangeStart(node: unknown): number | undefined {
  const range = (node as { range?: [number, number, number] } | null | undefined)?.range;
  return range?.[0];
}

function fieldName(path: Path): string | undefined {
  if (path.length === 0) return undefined;
  let out = '';
  for (const s of path) out += typeof s === 'number' ? `[${s}]` : out === '' ? s : `.${s}`;
  return out;
}

/** A YAML mapping, as parsed. */
export type Obj = Record<string, unknown>;

/** True for a mapping (a plain object, not an array). */
export function isObject(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Checks that `value` is a mapping with only `known` keys. */
export function mapping(c: Cursor, path: Path, value: unknown, known: readonly string[]): Obj {
  if (!isObject(value)) c.fail(path, `must be a mapping (key: value lines); got ${describeValue(value)}.`);
  for (const key of Object.keys(value)) {
    if (!known.includes(key))
      c.report([...path, key], `unknown field ${JSON.stringify(key)}; known fields here: ${known.join(', ')}.`, true);
  }
  return value;
}
