// Browser tests of the console: the real app listening on 127.0.0.1 (a fresh SQLite file, the harness's
// controllable clock), Debian's Chromium driven by playwright-core (no browser download), and a
// screenshot of each page under test-artifacts/console/. Without Chromium a local run skips with a
// message; CI (CI=true) fails instead.
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { type Browser, type BrowserContext, type Page, chromium } from "playwright-core";
import { consoleBundle } from "../../src/console/console.assets.ts";
import { ADMIN_TOKEN, createHarness, type Harness } from "./harness.ts";
import { REPO } from "./cli.ts";

export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
export const ARTIFACTS = path.join(REPO, "test-artifacts/console");

const chromiumProblem = existsSync(CHROMIUM) ? null : `no Chromium at ${CHROMIUM} (apt-get install chromium, or set CHROMIUM_PATH)`;
if (chromiumProblem !== null) {
  if (process.env.CI) throw new Error(`Chromium is required in CI: ${chromiumProblem}`);
  process.stderr.write(`\n!!! ${chromiumProblem}.\n!!! SKIPPING the console's browser tests.\n\n`);
}

/** Why the browser tests are skipped, or false when they run. */
export const browserSkip: string | false = chromiumProblem === null ? false : `${chromiumProblem}: SKIPPED`;

export interface ConsoleRig {
  h: Harness;
  /** http://127.0.0.1:<port> */
  base: string;
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** Problems the page reported: CSP violations, uncaught errors, console errors. */
  problems: string[];
  close(): Promise<void>;
}

/** The app on a loopback port with the console's bundle built, and one browser with one page. */
export async function startConsole(env: Record<string, string> = {}): Promise<ConsoleRig> {
  const h = await createHarness("sqlite", { ENDPOINT_ALLOW: "127.0.0.1", ...env });
  await consoleBundle(); // as `serve` does at start-up
  await h.app.listen({ host: "127.0.0.1", port: 0 });
  const { port } = h.app.server.address() as { port: number };
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await context.newPage();
  const problems: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error" && !/401 \(Unauthorized\)|403 \(Forbidden\)|404 \(Not Found\)/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  page.on("pageerror", (e) => problems.push(`pageerror: ${e.message}`));
  mkdirSync(ARTIFACTS, { recursive: true });
  return {
    h,
    base: `http://127.0.0.1:${port}`,
    browser,
    context,
    page,
    problems,
    async close() {
      await browser.close().catch(() => {});
      await h.close();
    },
  };
}

export async function screenshot(page: Page, name: string): Promise<void> {
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Signs in through the sign-in page, with the admin token or a login. */
export async function signIn(rig: ConsoleRig, who: { token: string } | { email: string; password: string } = { token: ADMIN_TOKEN }, next = "/console"): Promise<void> {
  const { page, base } = rig;
  await page.goto(`${base}/console/signin?next=${encodeURIComponent(next)}`);
  if ("token" in who) {
    await page.locator('[data-testid="signin-token"] input[name="token"]').fill(who.token);
    await page.locator('[data-testid="signin-token"] button').click();
  } else {
    await page.locator('[data-testid="signin-login"] input[name="email"]').fill(who.email);
    await page.locator('[data-testid="signin-login"] input[name="password"]').fill(who.password);
    await page.locator('[data-testid="signin-login"] button').click();
  }
  await page.waitForSelector('[data-testid="store-picker"]');
}
