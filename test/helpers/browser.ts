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

interface CspViolation {
  directive: string;
  /** `nodename.classes in .parent-classes` of the element at fault. */
  element: string;
  source: string;
}

/**
 * The one violation that is not ours: replacing a selection that starts in a highlighted span of the editor
 * (select all, then type or paste), Chrome's own editing copies the span's computed colour onto the line as
 * a style attribute. No script sets it (no source file), the CSP blocks it, and CodeMirror redraws the line
 * from its state at once. Any other inline style, anywhere, is a problem.
 */
function isBrowserEditingStyle(v: CspViolation): boolean {
  return v.directive === "style-src-attr" && v.source === "" && v.element.startsWith("div.cm-line in .cm-content");
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
  // CSP violations are reported from the page with the element at fault, found inside shadow roots too
  // (the editor lives in one), so each can be judged: `console.error` alone would say only "inline style".
  await page.exposeFunction("__cspViolation", (v: CspViolation) => {
    if (!isBrowserEditingStyle(v)) problems.push(`csp: ${v.directive} on ${v.element} (${v.source || "no script source"})`);
  });
  // Page-side JavaScript (the tests are typed without the DOM library).
  await page.addInitScript({
    content: `(() => {
      const report = (e) => {
        const el = e.composedPath()[0];
        const classes = (x) => (x && x.classList ? [...x.classList].join(".") : "");
        const element = el instanceof Element ? el.nodeName.toLowerCase() + "." + classes(el) + " in ." + classes(el.parentElement) : String(el);
        void window.__cspViolation({ directive: e.violatedDirective, element, source: e.sourceFile });
      };
      document.addEventListener("securitypolicyviolation", report, true);
      const attach = Element.prototype.attachShadow;
      Element.prototype.attachShadow = function (init) {
        const root = attach.call(this, init);
        // Reported here with the real target; not again, retargeted to the host, at the document.
        root.addEventListener("securitypolicyviolation", (e) => { e.stopPropagation(); report(e); }, true);
        return root;
      };
    })();`,
  });
  page.on("console", (m) => {
    if (m.type() !== "error" || /status of (401|403|404|422) /.test(m.text())) return;
    // Violations arrive through __cspViolation above, with their element.
    if (/violates the following Content Security Policy directive/.test(m.text())) return;
    problems.push(`console: ${m.text()} at ${m.location().url}:${m.location().lineNumber}`);
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
  // caret "initial": hiding the caret would make Playwright inject a <style>, which the CSP (rightly) refuses.
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true, caret: "initial" });
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
