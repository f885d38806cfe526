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
import { expect } from 'chai';
import { hostctl, ROOT } from './daemon.js';

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

/**
 * Pages of one browser for the console tests: each in its own context (own
 * cookies), every request checked to go to loopback only and recorded, and
 * all of them closed by `close()` (call it from an after hook).
 */
export class ConsolePages {
  private readonly contexts: import('playwright-core').BrowserContext[] = [];
  /** Every URL each page requested, in order. */
  readonly requests = new Map<import('playwright-core').Page, string[]>();

  constructor(readonly browser: Browser) {}

  async page(): Promise<import('playwright-core').Page> {
    const c = await this.browser.newContext();
    this.contexts.push(c);
    const p = await c.newPage();
    const seen: string[] = [];
    this.requests.set(p, seen);
    p.on('request', (r) => {
      const u = new URL(r.url());
      if (u.hostname !== '127.0.0.1') throw new Error(`the console requested ${r.url()}`);
      seen.push(`${r.method()} ${u.pathname}${u.search}`);
    });
    return p;
  }

  /** Opens a sign-in link (what `hostctl console` printed) and waits for the overview. */
  async admin(signInUrl: string): Promise<import('playwright-core').Page> {
    const p = await this.page();
    await p.goto(signInUrl);
    await p.getByRole('heading', { name: 'Overview' }).waitFor();
    return p;
  }

  /** Signs in as the local administrator of the daemon in `dataDir` (the link `hostctl console` prints). */
  async adminOf(dataDir: string): Promise<import('playwright-core').Page> {
    const r = await hostctl(dataDir, ['console']);
    expect(r.code, r.stderr).to.equal(0);
    return this.admin(r.stdout.trim());
  }

  /** Signs in at `url` by pasting `token`, and waits for the overview. */
  async withToken(url: string, token: string): Promise<import('playwright-core').Page> {
    const p = await this.page();
    await p.goto(url);
    await p.getByLabel('API token').fill(token);
    await p.getByRole('button', { name: 'Sign in with token' }).click();
    await p.getByRole('heading', { name: 'Overview' }).waitFor();
    return p;
  }

  async close(): Promise<void> {
    for (const c of this.contexts.splice(0)) await c.close().catch(() => undefined);
    await this.browser.close().catch(() => undefined);
  }
}

/** Opens a page of the console's navigation and waits until its live updates run (its stream is open and the list read), or it shows the API's refusal. */
export async function openPage(page: import('playwright-core').Page, nav: string, heading: string): Promise<void> {
  await page.getByRole('navigation', { name: 'Pages' }).getByRole('button', { name: nav, exact: true }).click();
  await page.getByRole('heading', { name: heading, exact: true }).waitFor();
  await page
    .getByRole('status')
    .filter({ hasText: /^Live: / })
    .or(page.getByRole('main').getByRole('alert').filter({ hasText: /./ }))
    .first()
    .waitFor();
}

/** Opens the create form `title` (a closed disclosure until asked for) and answers it. */
export async function openForm(page: import('playwright-core').Page, title: string): Promise<import('playwright-core').Locator> {
  await page.locator('summary', { hasText: title }).click();
  const form = page.getByRole('form', { name: title });
  await form.waitFor();
  return form;
}
