// The merchant's whole loop in a real browser: sign in, install a catalogue plugin, break it in the
// editor (the compile error marked on its line), save a version that fails at run time, watch a real
// signed delivery fail, run the unsaved source against that captured delivery in the test bench, fix it,
// save, replay the failed delivery and see the invoice completed. A screenshot of each page; a fresh
// profile loads the console, whose first page's assets are small (its load time is timed by
// bench/console/cold-load.ts, not asserted here: it depends on the machine).
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { consoleBundle } from "../../src/console/console.assets.ts";
import { parseFixture } from "../../src/plugins/fixtures.ts";
import { browserSkip, type ConsoleRig, screenshot, signIn, startConsole } from "../helpers/browser.ts";
import { CATALOG } from "../helpers/catalog.ts";

const SECRET = "merchant-loop-signing-secret";
const ORIGINAL = readFileSync(path.join(CATALOG, "generic-hmac.lua"), "utf8");
const BROKEN_LINE = ORIGINAL.split("\n").findIndex((l) => l.startsWith("local expected = hmacShaSign(")) + 1;
const SYNTAX_ERROR = ORIGINAL.replace("local expected = hmacShaSign(", "local expected = = hmacShaSign(");
const RUNTIME_ERROR = ORIGINAL.replace("local expected = hmacShaSign(", "local expected = hmacShaSig(");
/** The fix: the call spelled right again (with a note, so it is a new version rather than version 1 again). */
const FIXED = ORIGINAL.replace("local expected = hmacShaSign(", "-- fixed in the console\nlocal expected = hmacShaSign(");

declare const document: { querySelector(selector: string): { textContent: string | null } | null };
declare const performance: { getEntriesByType(type: string): { domContentLoadedEventEnd: number; responseEnd: number }[] };

describe("the merchant's loop in the browser", { skip: browserSkip }, () => {
  let rig: ConsoleRig;
  let store: { id: string; key: string };
  before(async () => {
    rig = await startConsole();
    store = await rig.h.store("Loop shop");
  });
  after(() => rig?.close());

  /** Save is a deploy step: review the diff against the live version, then confirm. */
  const deploy = async () => {
    await rig.page.locator('[data-testid="save"]').click();
    await rig.page.locator('[data-testid="deploy-confirm"]').click();
  };

  /** Replaces the editor's whole text as typing would (no auto-closed brackets). */
  const setSource = async (text: string) => {
    await rig.page.locator(".cm-content").click();
    await rig.page.keyboard.press("Control+A");
    await rig.page.keyboard.insertText(text);
  };

  test("install, break, see the failure, debug it against the captured delivery, fix, save, replay: the invoice is completed", { timeout: 120_000 }, async () => {
    const { page, base, h } = rig;
    await signIn(rig);

    // Install generic-hmac from the catalogue with its secret.
    await page.locator('[data-testid="install-form"] select[name="catalog"] option[value="generic-hmac"]').waitFor({ state: "attached" });
    await page.locator('[data-testid="install-form"] select[name="catalog"]').selectOption("generic-hmac");
    await page.locator('[data-testid="install-form"] input[name="name"]').fill("pay");
    await page.locator('[data-testid="install-form"] input[name="signingSecret"]').fill(SECRET);
    await page.locator('[data-testid="install-form"] button[type="submit"]').click();
    await page.waitForSelector('tr[data-plugin="pay"]');
    await screenshot(page, "plugins");

    // Open it: the editor with the catalogue source, completion of the sandbox's globals.
    await page.locator('tr[data-plugin="pay"] a').click();
    await page.waitForSelector(".cm-content");
    await page.waitForFunction(() => document.querySelector('[data-testid="compile-status"]') !== null);
    await page.locator(".cm-content").click();
    await page.keyboard.press("Control+End");
    await page.keyboard.type("\nhmacSh");
    await page.waitForSelector(".cm-tooltip-autocomplete", { timeout: 5000 });
    const suggestions = await page.locator(".cm-tooltip-autocomplete li").allTextContents();
    assert.ok(suggestions.some((s) => s.startsWith("hmacShaSign")), `completion offers hmacShaSign: ${suggestions.join(", ")}`);
    await page.keyboard.press("Escape");

    // Break it: a syntax error is marked on its line as you type, and cannot be saved.
    await setSource(SYNTAX_ERROR);
    await page.waitForSelector(`[data-testid="compile-jump"]:text-is("line ${BROKEN_LINE}")`);
    await page.locator('[data-testid="compile-jump"]').click();
    const marked = page.locator(".cm-line:has(.cm-lintRange-error)");
    await marked.waitFor();
    assert.match((await marked.textContent()) ?? "", /local expected = = hmacShaSign\(/);
    assert.equal(await page.locator(".cm-gutter-lint .cm-lint-marker-error").count(), 1);
    await screenshot(page, "editor-compile-error");
    await deploy();
    await page.waitForSelector(`[data-testid="editor-status"]:has-text("line ${BROKEN_LINE}")`);

    // A bug that compiles: saved as version 2, and a real signed delivery fails on it.
    await setSource(RUNTIME_ERROR);
    await page.waitForSelector('[data-testid="compile-status"]:has-text("compiles")');
    await deploy();
    await page.waitForSelector('[data-testid="editor-status"]:has-text("Saved as version 2")');

    const customer = await h.customer(store.id);
    const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "pay", items: [{ productVariantId: "var-loop", quantity: 1, price: 25 }] });
    const body = JSON.stringify({ invoiceId: invoice.id, status: "paid" });
    const sent = await fetch(`${base}/api/paymentPlugins?pluginName=pay&storeId=${store.id}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-signature": createHmac("sha256", SECRET).update(body).digest("hex") },
      body,
    });
    assert.equal(sent.status, 500, "the broken plugin fails the delivery");
    const failedId = sent.headers.get("x-delivery-id")!;
    assert.ok(failedId);

    // The test bench: the captured delivery, byte for byte; the unsaved source fails on its line, as the saved one does.
    await page.locator('[data-testid="bench-deliveries"]').focus();
    await page.locator(`[data-testid="bench-deliveries"] option[value="${failedId}"]`).waitFor({ state: "attached" });
    await page.locator('[data-testid="bench-deliveries"]').selectOption(failedId);
    await page.waitForSelector(`[data-testid="bench-loaded"]:has-text("${failedId}")`);
    assert.equal(await page.locator('[data-testid="bench-body"]').inputValue(), body);
    await page.locator('[data-testid="bench-run"]').click();
    await page.waitForSelector('[data-testid="run-unsaved"] [data-testid="run-error"]');
    assert.match((await page.locator('[data-testid="run-unsaved"] [data-testid="run-error"]').textContent()) ?? "", new RegExp(`hmacShaSig|nil`));
    await page.waitForSelector('[data-testid="run-saved"] [data-testid="run-error"]');
    assert.match((await page.locator('[data-testid="run-unsaved"] [data-testid="jump-to-error"]').textContent()) ?? "", new RegExp(`line ${BROKEN_LINE}`));
    await screenshot(page, "bench-failing");

    // Fix it in the editor: the unsaved run completes the payment while the saved version still fails.
    await setSource(FIXED);
    await page.waitForSelector('[data-testid="compile-status"]:has-text("compiles")');
    await page.locator('[data-testid="bench-run"]').click();
    await page.waitForSelector('[data-testid="run-unsaved"] [data-testid="run-result"]:has-text("pushInvoice")');
    assert.equal(await page.locator('[data-testid="run-unsaved"] [data-testid="run-error"]').count(), 0);
    assert.equal(await page.locator('[data-testid="run-saved"] [data-testid="run-error"]').count(), 1);
    await screenshot(page, "bench-fixed");

    // Save as a fixture for `storefront plugins test`: the file parses as one.
    const download = page.waitForEvent("download");
    await page.locator('[data-testid="bench-save-fixture"]').click();
    const file = await (await download).path();
    const fixture = parseFixture(JSON.parse(readFileSync(file, "utf8")), "saved.json");
    assert.equal(fixture.request.body.toString("utf8"), body);
    assert.deepEqual(fixture.expect, { kind: "result", status: "pushInvoice", invoiceId: invoice.id, logs: [] });

    // Save version 3 and replay the failed delivery: the invoice is completed.
    await deploy();
    await page.waitForSelector('[data-testid="editor-status"]:has-text("Saved as version 3")');
    await page.locator('[data-testid="bench-replay"]').click();
    await page.waitForSelector('[data-testid="replay-result"]:has-text("pending->completed")');
    assert.match((await page.locator('[data-testid="replay-result"]').textContent()) ?? "", /HTTP 200/);
    const completed = await h.get(`/api/service/invoices?id=${invoice.id}`, store.key);
    assert.equal(completed.json<{ data: { invoices: { status: string }[] } }>().data.invoices[0]!.status, "completed");

    // The versions' diff (v2 → v3 is the fix).
    await page.locator('[data-testid="diff-from"]').selectOption("2");
    await page.locator('[data-testid="diff-to"]').selectOption("3");
    await page.locator('[data-testid="show-diff"]').click();
    await page.waitForSelector('[data-testid="diff"] .cm-mergeView');
    await page.locator('[data-testid="diff"]').scrollIntoViewIfNeeded();
    await screenshot(page, "plugin-editor-diff");

    // Back on the list: the outcomes of the recent deliveries.
    await page.locator("header nav a", { hasText: "Plugins" }).click();
    await page.waitForSelector('tr[data-plugin="pay"] [data-testid="outcomes"] .badge');
    const outcomes = await page.locator('tr[data-plugin="pay"] [data-testid="outcomes"]').textContent();
    assert.match(outcomes ?? "", /plugin_error 1/);
    assert.match(outcomes ?? "", /applied 1/);
    await screenshot(page, "plugins-outcomes");
    assert.deepEqual(rig.problems, [], "no CSP violation or script error");
  });

  test("cold load: a fresh browser profile opens the plugins page with its data; the first page's assets are small", async () => {
    const { browser, base, context } = rig;
    const cold = await browser.newContext();
    await cold.addCookies(await context.cookies());
    const page = await cold.newPage();
    const started = Date.now();
    await page.goto(`${base}/console/stores/${store.id}/plugins`);
    await page.waitForSelector('tr[data-plugin="pay"]');
    const firstData = Date.now() - started;
    const nav = await page.evaluate(() => performance.getEntriesByType("navigation")[0]!.domContentLoadedEventEnd);
    await cold.close();
    const bundle = await consoleBundle();
    const sizes = [...bundle.byName.values()].map((a) => ({ name: a.name, br: a.br.length, gzip: a.gzip.length, raw: a.identity.length }));
    const shell = sizes.filter((s) => s.name === bundle.script || s.name === bundle.style).reduce((n, s) => n + s.br, 0);
    const all = sizes.reduce((n, s) => n + s.br, 0);
    process.stdout.write(`console cold load: DOMContentLoaded ${nav.toFixed(0)} ms, first data ${firstData} ms; brotli: shell ${shell} B, all ${all} B (${JSON.stringify(sizes)})\n`);
    assert.ok(shell < 30_000, `the first page's assets are ${shell} bytes compressed`);
  });
});
