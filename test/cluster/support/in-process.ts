// Set-up shared by the in-process cluster store tests: an error-code matcher, per-test cleanup, and a primary that is closed after each test.
import { afterEach } from 'node:test';
import { isFloodgateError } from '../../../src/index.js';
import { ClusterStorePrimary } from '../../../src/stores/cluster/index.js';

/** An assert.rejects/throws matcher for a FloodgateError with code `expected`. */
export const code = (expected: string) => (error: unknown) => isFloodgateError(error) && error.code === expected;

/** What to undo after the current test, last registered first; the calling test file must call {@link useCleanup} once. */
export const cleanup: (() => Promise<void> | void)[] = [];

/** Registers, in the calling test file, the afterEach that runs {@link cleanup}. */
export function useCleanup(): void {
  afterEach(async () => {
    for (const fn of cleanup.splice(0).reverse()) await fn();
  });
}

/** A primary on no node:cluster (transport-only), closed after the test. */
export function primaryOf(options: ConstructorParameters<typeof ClusterStorePrimary>[0] = {}): ClusterStorePrimary {
  const primary = new ClusterStorePrimary({ cluster: false, ...options });
  cleanup.push(() => primary.close());
  return primary;
}
