/** Warnings about a config's rules that start the gateway but probably do not do what was meant. */
/**
 * No rules at all, rules that can never match, and bearer tokens checked less than they should be.
 */
import { WarningCode, warnOnce, type WarningCodeValue } from '../../core/warnings.js';
import type { GatewayLogger } from '../runtime/log.js';
import { unreachableMessage, unreachableRules } from './unreachable-rules.js';
import type { GatewaySettings } from '../config/settings.js';

/** One warning about the rules. */
export interface RuleWarning {
  /** Its stable code. */
  readonly code: WarningCodeValue;
  /** What is wrong, what was probably meant, and how to fix it. */
  readonly message: string;
  /** What it is about (the file, or the rule), so each is warned of once. */
  readonly subject: string;
}

/**
 * The warnings about `settings`' rules: `rules: []` in a config file (the
 * command line always makes one rule), and each rule after a `final` rule
 * that takes all its requests.
 */
export function ruleWarnings(settings: GatewaySettings): RuleWarning[] {
  const out: RuleWarning[] = [];
  const file = settings.configFile;
  // A rate limit service without an upstream has nothing to forward: no HTTP rules is its usual shape.
  if (
    file !== undefined &&
    settings.rules.length === 0 &&
    settings.overload === undefined &&
    (settings.grpc === undefined || settings.upstream !== undefined)
  ) {
    out.push({
      code: WarningCode.NO_RULES,
      message:
        `${file} has rules: [], so every request is forwarded without limits (and the decision endpoint admits every request). ` +
        'Add a rule to limit, e.g. rules: [{ name: all, policies: ["100/1m"] }].',
      subject: file,
    });
  }
  if (settings.jwt !== undefined && settings.jwt.verify === undefined) {
    const where = file === undefined ? 'the jwt section' : `${file}${settings.jwt.line === undefined ? '' : `:${settings.jwt.line}`}`;
    out.push({
      code: WarningCode.UNVERIFIED_JWT_CLAIMS,
      message:
        `${where} sets dangerouslyUseUnverifiedClaims: jwt:CLAIM keys count by claims no signature vouches for, so any client can write a token with someone else's sub and spend that quota, or a new sub per request for a fresh one. ` +
        'Give the key that signs the tokens instead (jwt: { jwks: ./jwks.json }, publicKey or secretFile).',
      subject: `${file ?? ''}\u0000jwt`,
    });
  }
  const verify = settings.jwt?.verify;
  // An HMAC secret is this gateway's own; a public key or key set is usually an identity provider's, shared by every application it serves.
  if (verify !== undefined && verify.audience === undefined && verify.key.kind !== 'secret') {
    const where = file === undefined ? 'the jwt section' : `${file}${settings.jwt!.line === undefined ? '' : `:${settings.jwt!.line}`}`;
    out.push({
      code: WarningCode.JWT_AUDIENCE_UNCHECKED,
      message:
        `${where} verifies bearer tokens against ${verify.key.kind === 'jwks' ? 'a key set' : 'a public key'} without an audience, so a token its issuer made for another application (with its own sub) is counted here too. ` +
        `Add the audience this API's tokens carry, e.g. jwt: { audience: https://api.example.com${verify.issuer === undefined ? ', issuer: https://id.example.com/' : ''} }.`,
      subject: `${file ?? ''}\u0000jwt-audience`,
    });
  }
  const overload = settings.overload;
  const ceiling = overload === undefined ? undefined : overload.limit === 'adaptive' ? overload.adaptive.maxLimit : overload.limit;
  if (ceiling !== undefined && ceiling > settings.proxy.connections) {
    out.push({
      code: WarningCode.OVERLOAD_ABOVE_POOL,
      message:
        `overload lets ${ceiling} requests in flight (${overload!.limit === 'adaptive' ? 'adaptive.maxLimit' : 'limit'}) but proxy.connections is ${settings.proxy.connections}: ` +
        'requests admitted past the pool wait for a connection in arrival order, so a critical request can reach the upstream after sheddable ones. ' +
        `Raise proxy.connections to ${ceiling}, or lower the limit to ${settings.proxy.connections}.`,
      subject: `${file ?? ''}\u0000overload-pool`,
    });
  }
  const classes = overload?.priorities ?? [];
  const rest = classes.findIndex((p) => p.match === undefined);
  classes.slice(0, rest).forEach((p) => {
    const m = p.match!;
    // A path, host or method is the request's own; a header alone is whatever the client chose to send.
    if (
      m.headers === undefined ||
      m.pathPrefix !== undefined ||
      m.pathPattern !== undefined ||
      m.hosts !== undefined ||
      m.methods !== undefined
    )
      return;
    const names = m.headers.map(([name]) => name).join(', ');
    out.push({
      code: WarningCode.PRIORITY_FROM_HEADER,
      message:
        `overload class ${JSON.stringify(p.name)} is given to any request that carries ${names}, and any client can send that: under overload it is served ahead of ${classes[rest]!.name} traffic. ` +
        'If a proxy of yours in front of the gateway sets the header, make sure it drops any value the client sent; otherwise match the class by path or host.',
      subject: `${file ?? ''}\u0000overload\u0000${p.name}`,
    });
  });
  for (const unreachable of unreachableRules(settings.rules, settings.paths.caseSensitive)) {
    out.push({
      code: WarningCode.UNREACHABLE_RULE,
      message: unreachableMessage(file, unreachable),
      subject: `${file ?? ''}\u0000${unreachable.rule.name}\u0000${unreachable.by.name}`,
    });
  }
  return out;
}

/** Logs each of {@link ruleWarnings} at warn level and emits it once per process as a warning with its code. */
export function warnAboutRules(settings: GatewaySettings, log: GatewayLogger): void {
  for (const warning of ruleWarnings(settings)) {
    log.warn({ code: warning.code }, warning.message);
    warnOnce(warning.code, warning.message, warning.subject);
  }
}
