/** `floodgate/gateway`: the gateway as a library (start one in-process, validate configs, reuse the proxy); loads undici, prom-client, yaml and pino only when called. */
export { Gateway } from './server.js';
export type { GatewayDeps, GatewayStartOptions } from './server.js';
export { loadGatewayDeps } from './deps.js';
export { ConfigError, loadConfigFile, parseConfigText } from './config.js';
export type { SettingsOverrides } from './config.js';
export { parseCommandLine } from './args.js';
export type { Command } from './args.js';
export { main } from './cli.js';
export { createLogger, keyId } from './log.js';
export type { GatewayLogger } from './log.js';
export { GatewayMetrics } from './metrics.js';
export type { DecisionOutcome, UpstreamOutcome } from './metrics.js';
export { UpstreamProxy } from './proxy.js';
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
} from './settings.js';
