/**
 * Chromium from Debian's packages (deploy/install-deps.sh), driven by
 * playwright-core, launched so that it makes no request beyond loopback: no
 * background networking, no component updates, no first-run or sync work,
 * every host name but the loopback ones resolving to nothing, and every
 * address that is not loopback sent to a proxy that does not exist.
 */
import fs from 'node:fs';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { ROOT } from './daemon.js';

export const CHROMIUM = process.env.HOSTD_TEST_CHROMIUM ?? '/usr/bin/chromium';

/** Where screenshots go (ignored by git). */
export const ARTIFACTS = path.join(ROOT, 'test-artifacts/console');

export const LOOPBACK_ONLY_ARGS = [
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-default-apps',
  '--disable-domain-reliability',
  '--disable-sync',
  '--disable-client-side-phishing-detection',
  '--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication,CertificateTransparencyComponentUpdater',
  '--no-first-run',
  '--no-default-browser-check',
  '--no-pings',
  '--metrics-recording-only',
  // Names: only loopback resolves. Addresses: loopback is reached directly (Chromium's implicit bypass), anything else goes to a closed port.
  '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1',
  '--proxy-server=http://127.0.0.1:9',
];

/** Why the browser tests cannot run here, or undefined when they can. */
export function browserMissing(): string | undefined {
  return fs.existsSync(CHROMIUM) ? undefined : `no Chromium at ${CHROMIUM} (deploy/install-deps.sh installs Debian's chromium)`;
}

export async function launchBrowser(): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, headless: true, args: LOOPBACK_ONLY_ARGS });
}

/** A screenshot of the page as the test saw it, for docs/console.md and for a failure's post-mortem. */
export async function screenshot(page: import('playwright-core').Page, name: string): Promise<void> {
  fs.mkdirSync(ARTIFACTS, { recursive: true });
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}
