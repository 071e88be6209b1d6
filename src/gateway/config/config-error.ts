/** ConfigError: a config file problem placed at its file, line, column and field. */
import { FloodgateError, type ErrorCodeValue } from '../../index.js';

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
