// The console at every width and in both colour schemes, and accessible (issue 31): at 800 px the header
// fits with Sign out on screen, at 390 px every section of the navigation is reachable and the editor is
// usable, dark mode follows prefers-color-scheme (the editor too), the shell paints before the data
// arrives, a skip link leads to the content, and axe-core finds no serious or critical violation on any
// page, in light and dark.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { seriousViolations } from "../helpers/axe.ts";
import { browserSkip, type ConsoleRig, screenshot, signIn, startConsole } from "../helpers/browser.ts";
import { expectStatus } from "../helpers/harness.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { deliver, installPlugin } from "../helpers/webhook.ts";

declare const document: { querySelector(s: string): { getBoundingClientRect(): { right: number; width: number; bottom: number } } | null; documentElement: { scrollWidth: number } };
declare const window: { innerWidth: number; getComputedStyle(e: unknown): { backgroundColor: string } };

describe("console layout and accessibility in the browser", { skip: browserSkip }, () => {
  let rig: ConsoleRig;
  let receiver: Receiver;
  let store: { id: string };
  let deliveryId: string;
  let pages: [string, string][];
  before(async () => {
    rig = await startConsole();
    receiver = await startReceiver();
    store = await rig.h.store("Layout shop");
    await installPlugin(rig.h, store.id, "pay", 'log("paid?", "warning")\nreturn { status = "ignore" }', {});
    expectStatus(await rig.h.admin("PUT", `/api/admin/stores/${store.id}/plugins/pay`, { source: '-- v2\nlog("paid?", "warning")\nreturn { status = "ignore" }' }), 200);
    const r = await deliver(rig.h, store.id, "pay", JSON.stringify({ id: "evt_1", type: "payment.succeeded", amount: 5 }));
    deliveryId = String(r.headers["x-delivery-id"]);
    expectStatus(await rig.h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url: receiver.url, description: "fulfilment" }), 201);
    const customer = await rig.h.customer(store.id);
    await rig.h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
    await signIn(rig);
    const s = `/console/stores/${store.id}`;
    pages = [
      ["plugins", `${s}/plugins`],
      ["plugin", `${s}/plugins/pay`],
      ["deliveries", `${s}/deliveries`],
      ["delivery", `${s}/deliveries/${deliveryId}`],
      ["events", `${s}/events`],
      ["endpoints", `${s}/endpoints`],
    ];
  });
  after(async () => {
    await receiver?.close();
    await rig?.close();
  });

  const open = async (page: Page, path: string) => {
    await page.goto(`${rig.base}${path}`);
    await page.locator('main[id="content"] :is(h1, [data-testid="editor"])').first().waitFor();
    await page.locator("main .muted:text-is('Loading…')").waitFor({ state: "detached" }).catch(() => {});
  };

  test("at 800 px the header fits: Sign out is on screen and the page does not scroll sideways", async () => {
    const { page } = rig;
    await page.setViewportSize({ width: 800, height: 900 });
    await open(page, pages[0]![1]);
    const right = await page.evaluate(() => document.querySelector('[data-testid="signout"]')!.getBoundingClientRect().right);
    assert.ok(right <= 800, `Sign out ends at ${right} px`);
    assert.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= 800);
    await screenshot(page, "layout-800");
  });

  test("at 390 px every section of the navigation is reachable and the editor is wider than 300 px", async () => {
    const { page } = rig;
    await page.setViewportSize({ width: 390, height: 844 });
    await open(page, pages[1]![1]);
    await page.locator(".cm-content").waitFor();
    for (const label of ["Plugins", "Deliveries", "Events", "Endpoints"]) {
      const link = page.locator("header nav a", { hasText: label });
      const box = await link.boundingBox();
      assert.ok(box !== null && box.x >= 0 && box.x + box.width <= 390, `${label} is on screen: ${JSON.stringify(box)}`);
    }
    const editor = await page.evaluate(() => document.querySelector('[data-testid="editor"]')!.getBoundingClientRect().width);
    assert.ok(editor > 300, `the editor is ${editor} px wide`);
    await screenshot(page, "layout-390-plugin");
    await page.locator("header nav a", { hasText: "Endpoints" }).click();
    await page.locator("h1", { hasText: "Endpoints" }).waitFor();
    await page.setViewportSize({ width: 1400, height: 900 });
  });

  test("dark mode follows prefers-color-scheme, the editor included", async () => {
    const { page } = rig;
    await page.emulateMedia({ colorScheme: "dark" });
    await open(page, pages[1]![1]);
    await page.locator(".cm-editor").waitFor();
    const [body, editor] = await page.evaluate(() => [window.getComputedStyle(document.querySelector("body")).backgroundColor, window.getComputedStyle(document.querySelector('[data-testid="editor"]')).backgroundColor]);
    const dark = (rgb: string) => rgb.match(/\d+/g)!.slice(0, 3).map(Number).reduce((a, b) => a + b, 0) < 150;
    assert.ok(dark(body!), `page background ${body}`);
    assert.ok(dark(editor!), `editor background ${editor}`);
    const cm = await page.locator(".cm-editor").evaluate((e) => (globalThis as unknown as typeof window).getComputedStyle(e).backgroundColor);
    assert.ok(dark(cm), `CodeMirror background ${cm}`);
    await screenshot(page, "dark-plugin");
    await page.emulateMedia({ colorScheme: "light" });
  });

  test("the shell paints before the data arrives", async () => {
    const { page } = rig;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    await page.route("**/api/admin/stores", async (route) => {
      await held;
      await route.continue();
    });
    await page.goto(`${rig.base}${pages[0]![1]}`);
    await page.locator("header.top nav a", { hasText: "Deliveries" }).waitFor();
    assert.equal(await page.locator('tr[data-plugin="pay"]').count(), 0, "the data has not arrived yet");
    release();
    await page.locator('tr[data-plugin="pay"]').waitFor();
    await page.unroute("**/api/admin/stores");
  });

  test("a skip link leads past the navigation to the content", async () => {
    const { page } = rig;
    await open(page, pages[0]![1]);
    await page.keyboard.press("Tab");
    const skip = page.locator("a.skip-link");
    assert.equal(await skip.evaluate((e) => e === (e.ownerDocument as unknown as { activeElement: unknown }).activeElement), true, "the first Tab reaches it");
    await page.keyboard.press("Enter");
    assert.equal(await page.locator("main#content").evaluate((e) => e === (e.ownerDocument as unknown as { activeElement: unknown }).activeElement), true);
  });

  for (const scheme of ["light", "dark"] as const) {
    test(`axe-core finds no serious or critical violation on any page (${scheme})`, { timeout: 120_000 }, async () => {
      const { page } = rig;
      await page.emulateMedia({ colorScheme: scheme });
      const found: string[] = [];
      for (const [name, path] of pages) {
        await open(page, path);
        if (name === "plugin") await page.locator(".cm-content").waitFor();
        if (name === "events") await page.locator('[data-testid="show-event"]').first().click();
        if (name === "plugin") {
          await page.locator('[data-testid="show-diff"]').click();
          await page.locator('[data-testid="diff"] .cm-mergeView').waitFor();
        }
        found.push(...(await seriousViolations(page)).map((v) => `${name}: ${v}`));
      }
      await page.goto(`${rig.base}/console/signin`);
      found.push(...(await seriousViolations(page)).map((v) => `signin: ${v}`));
      await page.emulateMedia({ colorScheme: "light" });
      assert.deepEqual(found, []);
    });
  }
});
