/** `floodgate/gateway`: the gateway as a library (start one in-process, validate configs, reuse the proxy). */
/**
 * Loads undici, prom-client, yaml and pino only when called.
 */

export { Gateway } from './serve/gateway.js';
export type { GatewayDeps, GatewayStartOptions } from './serve/gateway.js';
export { loadGatewayDeps } from './runtime/optional-deps.js';
export { loadConfigFile, parseConfigText } from './config/config-file.js';
export { ConfigError } from './config/config-error.js';
export type { SettingsOverrides } from './config/config-file.js';
export { parseCommandLine } from './cli/args.js';
export type { Command } from './cli/args.js';
export { main } from './cli/cli.js';
export { createLogger, keyId } from './runtime/log.js';
export type { GatewayLogger } from './runtime/log.js';
export { GatewayMetrics } from './runtime/metrics.js';
export type { DecisionOutcome, UpstreamOutcome } from './runtime/metrics.js';
export { UpstreamProxy } from './serve/proxy.js';
export type {
  FailurePolicy,
  GatewaySettings,
  KeySettings,
  KeyValidation,
  ListenAddress,
  LogLevel,
  MatchSettings,
  PolicySettings,
  ProxySettings,
  RuleSettings,
  StoreSettings,
} from './config/settings.js';
