/** The HTTP middleware's own timeout around each limiter call, so a store that never answers cannot hang a request. */
import { ErrorCode, FloodgateError } from '../core/errors.js';

/** Bounds limiter calls by the middleware's `timeout`, and recognises the errors it made (their late answers are rewarded). */
export class CallGuard {
  /** Errors made when the timeout fired. */
  private readonly timeouts = new WeakSet<object>();

  /** @param ms - the `timeout` option in ms; undefined waits for the store's own timeout */
  constructor(private readonly ms: number | undefined) {}

  /** `promise`, or a STORE_TIMEOUT rejection once `ms` pass without an answer. */
  wrap<T>(promise: Promise<T>): Promise<T> {
    const ms = this.ms;
    if (ms === undefined) return promise;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        const error = new FloodgateError(ErrorCode.STORE_TIMEOUT, `the limiter did not answer within ${ms} ms (HTTP middleware timeout).`);
        this.timeouts.add(error);
        reject(error);
      }, ms);
      timer.unref?.();
      promise.then(
        (value) => {
          clearTimeout(timer);
          resolve(value);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  }

  /** True for an error {@link wrap} made when its timeout fired. */
  timedOut(error: unknown): boolean {
    return typeof error === 'object' && error !== null && this.timeouts.has(error);
  }
}
