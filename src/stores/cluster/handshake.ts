/** The cluster client's handshake. */
/**
 * Says hello to the primary, again with a doubling delay, until it answers or nobody waits.
 */
import type { Channel } from './channels.js';
import { PROTOCOL_VERSION } from './protocol.js';

/** First handshake retry, in ms; doubles up to HELLO_MAX_MS while calls wait. */
const HELLO_FIRST_MS = 5;
const HELLO_MAX_MS = 250;

/** The hellos of one client. */
export class Handshake {
  private timer: NodeJS.Timeout | undefined;
  private delay = HELLO_FIRST_MS;

  /**
   * @param channel - where the hellos go
   * @param waiting - whether a retry is still wanted (not answered, calls queued, not closed)
   */
  constructor(
    private readonly channel: Channel,
    private readonly waiting: () => boolean,
  ) {}

  /** Starts saying hello, unless it already is. */
  start(): void {
    if (this.timer !== undefined) return;
    this.delay = HELLO_FIRST_MS;
    this.hello();
  }

  /** Stops the retries (answered, refused or closed). */
  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }

  private hello(): void {
    this.channel.send({ floodgate: PROTOCOL_VERSION, t: 'hello' }, () => {
      // The channel is closed: 'disconnect' fails the waiting calls.
    });
    this.timer = setTimeout(() => {
      this.timer = undefined;
      if (this.waiting()) this.hello();
    }, this.delay);
    this.delay = Math.min(this.delay * 2, HELLO_MAX_MS);
  }
}
