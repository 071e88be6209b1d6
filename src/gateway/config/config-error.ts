/** ConfigError: a config file problem placed at its file, line, column and field. */
import { ErrorCode, FloodgateError, type ErrorCodeValue } from '../../index.js';

/** A config file problem, placed in the file. `code` is INVALID_CONFIG, CONFIG_SYNTAX or CONFIG_UNREADABLE. */
export class ConfigError extends FloodgateError {
  /** The file. */
  readonly file: string;
  /** 1-based line, when known. */
  readonly line: number | undefined;
  /** 1-based column, when known. */
  readonly column: number | undefined;
  /** Dotted path of the field, e.g. `rules[1].policies[0].limit`, when one is at fault. */
  readonly field: string | undefined;

  /** @param where - file, position and field; the message is prefixed with `file:line:column: field:` */
  constructor(
    code: ErrorCodeValue,
    where: { file: string; line?: number; column?: number; field?: string },
    message: string,
    cause?: unknown,
  ) {
    const position = where.line === undefined ? where.file : `${where.file}:${where.line}:${where.column ?? 1}`;
    super(code, `${position}: ${where.field === undefined ? '' : `${where.field}: `}${message}`, cause);
    this.name = 'ConfigError';
    this.file = where.file;
    this.line = where.line;
    this.column = where.column;
    this.field = where.field;
  }
}

/**
 * Every independent problem of one config file at once (`floodgate check` lists them all), in file order.
 * Thrown only for two or more; a file with one problem throws that {@link ConfigError} itself.
 */
export class ConfigErrors extends ConfigError {
  /** Each problem, as it would have been thrown alone. */
  readonly errors: readonly ConfigError[];

  /** @param errors - two or more problems of `file`, in the order to show them */
  constructor(file: string, errors: readonly ConfigError[]) {
    const code = errors.every((e) => e.code === errors[0]!.code) ? errors[0]!.code : ErrorCode.INVALID_CONFIG;
    super(code, { file }, `${errors.length} problems\n${errors.map((e) => `  ${e.message}`).join('\n')}`);
    this.name = 'ConfigErrors';
    this.errors = errors;
  }
}
