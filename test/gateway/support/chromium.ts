// Headless Chromium for the dashboard tests: the system's chromium binary (Debian's package, or FLOODGATE_CHROMIUM) driven through playwright-core.
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import { after, before } from 'node:test';
import { chromium, type Browser } from 'playwright-core';

/** Chromium's binary: FLOODGATE_CHROMIUM, else `chromium` or `chromium-browser` on PATH (Debian's package puts it in /usr/bin), else macOS's app. */
export function findChromium(): string {
  const candidates = [
    ...(process.env.FLOODGATE_CHROMIUM ? [process.env.FLOODGATE_CHROMIUM] : []),
    ...(process.env.PATH ?? '')
      .split(delimiter)
      .filter((dir) => dir !== '')
      .flatMap((dir) => [join(dir, 'chromium'), join(dir, 'chromium-browser')]),
    '/usr/bin/chromium',
    '/Applications/Chromium.app/Contents/MacOS/Chromium',
  ];
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      // try the next one
    }
  }
  throw new Error(
    'Chromium was not found (looked for chromium and chromium-browser on PATH, and FLOODGATE_CHROMIUM); this test drives a real ' +
      'headless Chromium. Install it with `sudo apt-get install -y chromium` (npm test installs it when it may), then run the test again.',
  );
}

/** A headless Chromium that a test file shares. */
export interface ChromiumFixture {
  /** The browser (available from the `before` hook on). */
  readonly browser: Browser;
}

/**
 * Registers `before`/`after` hooks in the current suite (or file) that launch headless Chromium and close it.
 * Call it before the gateway fixture: hooks run in the order registered, so the browser's connections are closed before the gateways drain.
 */
export function chromiumFixture(): ChromiumFixture {
  let browser: Browser | undefined;
  before(async () => {
    // Chromium refuses to start as root with its sandbox, and CI containers run the tests as root.
    browser = await chromium.launch({ executablePath: findChromium(), args: ['--no-sandbox'] });
  });
  after(async () => {
    await browser?.close();
  });
  return {
    get browser(): Browser {
      if (browser === undefined) throw new Error('the browser launches in a before hook; use it inside tests');
      return browser;
    },
  };
}
