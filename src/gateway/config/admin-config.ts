/** The `admin` setting. */
/**
 * A listen address alone (metrics and health only), or `{ listen, token | tokenFile, hosts }`, where a token also
 * turns on the admin API and hosts names the Host values answered; and reading `--admin-token-file`.
 */
import { readFileSync } from 'node:fs';
import { isAbsolute, resolve } from 'node:path';
import { describeValue } from '../../core/describe-value.js';
import { InvalidValue, parseListen } from './values.js';
import type { ListenAddress } from './settings.js';
import { mapping, type Cursor, type Path } from './yaml-cursor.js';

/** Shortest admin token accepted: a guessable token would hand anyone on the admin network every key's unblock. */
const MIN_ADMIN_TOKEN_LENGTH = 16;

const ADMIN_FIELDS = ['listen', 'token', 'tokenFile', 'hosts'] as const;
const EXAMPLE = 'e.g. admin: { listen: 127.0.0.1:9090, tokenFile: /run/secrets/floodgate-admin }';

/** The admin listener and, when given, the admin API's bearer token. */
export interface AdminSection {
  /** Where the admin listener listens. */
  readonly listen: ListenAddress;
  /** The bearer token of the admin API; undefined leaves the API off. */
  readonly token: string | undefined;
  /** The names the listener answers for besides IP literals and `localhost` (`*.x` for names under x); undefined answers any Host. */
  readonly hosts?: readonly string[] | undefined;
}

/**
 * Checks `admin.hosts`: a list of host names (letters, digits, `-`, `.`),
 * each maybe starting with `*.` for the names under it; returned lower case.
 * @throws InvalidValue naming the entry that is not one
 */
function parseAdminHosts(value: unknown): string[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new InvalidValue(
      `must be a list of host names, e.g. hosts: [floodgate-admin.internal, "*.svc.cluster.local"]; got ${describeValue(value)}.`,
    );
  return value.map((entry, i) => {
    if (typeof entry !== 'string' || !/^(\*\.)?[a-z0-9-]+(\.[a-z0-9-]+)*$/i.test(entry))
      throw new InvalidValue(
        `entry ${i} must be a host name without port or scheme, or *. and a domain; got ${describeValue(entry)}. IP addresses and localhost are always answered.`,
      );
    return entry.toLowerCase();
  });
}

/**
 * Checks a token: long enough, no whitespace inside (it travels in an
 * `Authorization` header), printable.
 * @throws InvalidValue naming what is wrong
 */
function checkAdminToken(token: unknown, where: string): string {
  if (typeof token !== 'string') throw new InvalidValue(`must be a string; got ${describeValue(token)}.`);
  if (token.length < MIN_ADMIN_TOKEN_LENGTH)
    throw new InvalidValue(
      `${where} is ${token.length} characters; an admin token needs at least ${MIN_ADMIN_TOKEN_LENGTH} (e.g. the output of openssl rand -hex 32).`,
    );
  if (!/^[\x21-\x7e]+$/.test(token))
    throw new InvalidValue(`${where} may hold only printable ASCII without spaces, as it is sent in an Authorization: Bearer header.`);
  return token;
}

/**
 * Reads a token file: its content without the trailing newline editors and
 * `echo` add.
 * @throws InvalidValue when the file cannot be read or its token is unfit
 */
export function readAdminTokenFile(file: string, base = process.cwd()): string {
  const path = isAbsolute(file) ? file : resolve(base, file);
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    throw new InvalidValue(`cannot read the admin token file ${JSON.stringify(path)}: ${(error as Error).message}`);
  }
  return checkAdminToken(text.replace(/\r?\n$/, ''), `the token in ${JSON.stringify(path)}`);
}

/** Parses the config file's `admin` value (relative token files are resolved from `dir`, the config file's directory). */
export function adminSection(c: Cursor, value: unknown, dir: string): AdminSection {
  const path: Path = ['admin'];
  if (typeof value === 'string' || typeof value === 'number') return { listen: c.at(path, () => parseListen(value)), token: undefined };
  const o = mapping(c, path, value, ADMIN_FIELDS);
  if (o.listen === undefined) c.fail(path, `needs listen, the HOST:PORT of the admin listener (${EXAMPLE}).`);
  const listen = c.at([...path, 'listen'], () => parseListen(o.listen));
  const hosts = o.hosts === undefined ? undefined : c.at([...path, 'hosts'], () => parseAdminHosts(o.hosts));
  if (o.token !== undefined && o.tokenFile !== undefined)
    c.fail([...path, 'tokenFile'], 'and token are both set; keep one (tokenFile keeps the secret out of the config file).');
  if (o.token !== undefined) return { listen, hosts, token: c.at([...path, 'token'], () => checkAdminToken(o.token, 'the token')) };
  if (o.tokenFile !== undefined) {
    const file = o.tokenFile;
    if (typeof file !== 'string' || file === '') c.fail([...path, 'tokenFile'], `must be a file path; got ${describeValue(file)}.`);
    return { listen, hosts, token: c.at([...path, 'tokenFile'], () => readAdminTokenFile(file, dir)) };
  }
  return { listen, hosts, token: undefined };
}
