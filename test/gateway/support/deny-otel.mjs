// Preloaded with --import: makes @opentelemetry/api unresolvable, as if it were not installed, so a test sees whether the gateway tries to load it.
import { register } from 'node:module';

const hook = `
export async function resolve(specifier, context, next) {
  if (specifier === '@opentelemetry/api' || specifier.startsWith('@opentelemetry/api/')) {
    const error = new Error("Cannot find package '" + specifier + "' (hidden by deny-otel.mjs)");
    error.code = 'ERR_MODULE_NOT_FOUND';
    throw error;
  }
  return next(specifier, context);
}
`;
register(`data:text/javascript,${encodeURIComponent(hook)}`);
