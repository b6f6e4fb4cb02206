/**
 * Headless Chromium for browser tests, from the system package (never a downloaded browser):
 * `apt-get install -y chromium` puts it at /usr/bin/chromium. `KITCHEN_CHROMIUM` overrides the path.
 */
import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

/** Where the system Chromium lives. */
export const CHROMIUM_PATH = process.env.KITCHEN_CHROMIUM ?? '/usr/bin/chromium';

/** True when a Chromium binary exists; tests use it with `describe.skipIf(!hasChromium())`. */
export function hasChromium(): boolean {
  return existsSync(CHROMIUM_PATH);
}

/**
 * Launches headless Chromium with everything that could reach the network switched off, or returns
 * null when Chromium is not installed (the caller skips its tests then).
 */
export async function launchBrowser(): Promise<Browser | null> {
  if (!hasChromium()) return null;
  return chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-quic',
      '--no-first-run',
    ],
  });
}
