// Collects the process warnings floodgate emits while a test runs, so tests can assert their exact code and text.

/** A warning as tests compare it. */
export interface SeenWarning {
  code: string | undefined;
  message: string;
}

/** Starts collecting FLOODGATE_* warnings; `stop` waits a turn (warnings are emitted on the next tick) and returns them. */
export function captureWarnings(): { stop: () => Promise<SeenWarning[]> } {
  const seen: SeenWarning[] = [];
  const listener = (warning: Error & { code?: string }): void => {
    if (warning.code?.startsWith('FLOODGATE_') === true) seen.push({ code: warning.code, message: warning.message });
  };
  process.on('warning', listener);
  return {
    async stop() {
      await new Promise((resolve) => setImmediate(resolve));
      process.off('warning', listener);
      return seen;
    },
  };
}
