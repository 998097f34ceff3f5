// The console in a real browser: signing in (admin token and login, wrong password), CSRF rejection of a
// forged write, and a session that ends while the page is open (the next request goes to sign-in).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { browserSkip, type ConsoleRig, screenshot, signIn, startConsole } from "../helpers/browser.ts";
import { ADMIN_TOKEN } from "../helpers/harness.ts";

const PASSWORD = "a long enough password";
/** What page.evaluate's callbacks use of the page (the tests compile without the DOM library). */
declare const document: { querySelector(selector: string): { textContent: string | null } | null; cookie: string };

describe("console sign-in in the browser", { skip: browserSkip }, () => {
  let rig: ConsoleRig;
  let storeId: string;
  before(async () => {
    rig = await startConsole({ CONSOLE_SESSION_IDLE_MINUTES: "30" });
    storeId = (await rig.h.store("Browser shop")).id;
    await rig.h.store("Someone else's shop");
    await rig.h.services.console.addUser("merchant@example.com", PASSWORD, [storeId]);
  });
  after(() => rig?.close());

  test("an unsigned visitor is sent to sign-in; a wrong password says so; the right one opens the store's plugins", async () => {
    const { page, base } = rig;
    await page.goto(`${base}/console`);
    await page.waitForSelector('[data-testid="signin-login"]');
    await screenshot(page, "signin");
    await page.locator('[data-testid="signin-login"] input[name="email"]').fill("merchant@example.com");
    await page.locator('[data-testid="signin-login"] input[name="password"]').fill("not the password");
    await page.locator('[data-testid="signin-login"] button').click();
    await page.waitForFunction(() => document.querySelector('[data-testid="signin-error"]')?.textContent?.includes("Wrong e-mail or password"));
    await signIn(rig, { email: "merchant@example.com", password: PASSWORD });
    assert.equal(new URL(page.url()).pathname, `/console/stores/${storeId}/plugins`);
    const options = await page.locator('[data-testid="store-picker"] option').allTextContents();
    assert.deepEqual(options, [`Browser shop (${storeId})`], "a login sees only its store");
    const cookies = await rig.context.cookies();
    const session = cookies.find((c) => c.name === "storefront_session");
    assert.ok(session);
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, "Strict");
    assert.equal(await page.evaluate(() => document.cookie), "", "the session cookie is out of the page's reach");
    await screenshot(page, "plugins-empty");
    assert.deepEqual(rig.problems, []);
  });

  test("a write without the CSRF token is refused even with the session cookie; with it, it goes through", async () => {
    const { page } = rig;
    const forged = await page.evaluate(async (id) => {
      const r = await fetch(`/api/admin/stores/${id}/plugins/pay`, { method: "PUT", headers: { "content-type": "application/json" }, body: JSON.stringify({ catalog: "generic-hmac", secrets: { signingSecret: "s" } }) });
      return { status: r.status, body: (await r.json()) as { error: { code: string } } };
    }, storeId);
    assert.equal(forged.status, 403);
    assert.equal(forged.body.error.code, "csrf_failed");
    const real = await page.evaluate(async (id) => {
      const s = (await (await fetch("/console/api/session")).json()) as { csrfToken: string };
      const r = await fetch(`/api/admin/stores/${id}/plugins/pay`, { method: "PUT", headers: { "content-type": "application/json", "x-csrf-token": s.csrfToken }, body: JSON.stringify({ catalog: "generic-hmac", secrets: { signingSecret: "s" }, enabled: false }) });
      return r.status;
    }, storeId);
    assert.equal(real, 201);
  });

  test("a session idle past its limit ends: the next request opens a sign-in dialog over the page, and signing in there carries on in place", async () => {
    const { page } = rig;
    rig.h.clock.advance(31 * 60_000);
    await page.locator("header nav a", { hasText: "Plugins" }).click();
    const dialog = page.locator('[data-testid="reauth-dialog"]');
    await dialog.waitFor();
    assert.equal(new URL(page.url()).pathname, `/console/stores/${storeId}/plugins`, "the page did not jump to sign-in");
    await screenshot(page, "signin-expired");
    await dialog.locator('[data-testid="signin-token"] input[name="token"]').fill(ADMIN_TOKEN);
    await dialog.locator('[data-testid="signin-token"] button').click();
    await dialog.waitFor({ state: "detached" });
    await page.waitForSelector('[data-testid="plugins-list"]:not(:has-text("Loading"))');
    assert.equal(new URL(page.url()).pathname, `/console/stores/${storeId}/plugins`);
    assert.equal(await page.locator('[data-testid="store-picker"] option').count(), 2, "the admin token sees every store");
  });

  test("the CSP refuses an inline style or script on the console's pages, and the browser rig reports it (the guard every browser test ends on can fail)", async () => {
    const { page, base } = rig;
    await page.goto(`${base}/console`);
    await page.waitForSelector('[data-testid="store-picker"]');
    const before = rig.problems.length;
    await page.evaluate(`document.body.setAttribute("style", "background: red"); const s = document.createElement("script"); s.textContent = "window.__ran = 1"; document.body.append(s);`);
    await page.waitForFunction(`true`);
    for (let i = 0; i < 50 && rig.problems.length < before + 2; i++) await new Promise((r) => setTimeout(r, 20));
    const found = rig.problems.splice(before);
    assert.ok(found.some((p) => /csp: style-src-attr on body/.test(p)), found.join("\n"));
    assert.ok(found.some((p) => /csp: script-src-elem/.test(p)), found.join("\n"));
    assert.equal(await page.evaluate(`window.__ran === undefined`), true, "the inline script did not run");
  });
});
