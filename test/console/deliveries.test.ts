// The console's deliveries and events pages in a real browser: a delivery whose body, headers and plugin
// logs carry script, img-onerror and javascript: payloads is shown as text and runs nothing; the live
// view shows a delivery posted while the page is open; replay from a delivery's page; the events page
// shows an invoice event and its attempts, and re-send makes a new attempt; a login cannot open another
// store's deliveries.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import type { Page } from "playwright-core";
import { browserSkip, type ConsoleRig, screenshot, signIn, startConsole } from "../helpers/browser.ts";
import { expectStatus } from "../helpers/harness.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";
import { deliver, deliverSigned, installPlugin, SIGNED_PLUGIN } from "../helpers/webhook.ts";

const SCRIPT = "<script>window.__pwned=1</script>";
const IMG = `<img src=x onerror="window.__pwned=1">`;
const JS_URL = "javascript:window.__pwned=1";
const PASSWORD = "a long enough password";

/** Logs what it was sent, hostile or not, and decides nothing. */
const ECHO_PLUGIN = `
log(request.headers["x-evil"] or "", "info")
log(request.body, "warn")
return { status = "ignore" }
`;

/** Set only if one of the payloads ran (an expression: these tests are type-checked without the DOM library). */
const PWNED = "globalThis.__pwned";

/** Polls from the test's side (a string predicate in the page would be an eval, which the CSP refuses). */
async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
const rowCount = (page: Page, selector: string, n: number) => until(`${n} rows of ${selector}`, async () => (await page.locator(selector).count()) === n);
const textIs = (page: Page, selector: string, text: string) => until(`${selector} to say ${text}`, async () => (await page.locator(selector).textContent()) === text);

describe("console deliveries and events in the browser", { skip: browserSkip }, () => {
  let rig: ConsoleRig;
  let receiver: Receiver;
  let store: { id: string; key: string };
  let other: { id: string };
  let hostileId: string;

  before(async () => {
    rig = await startConsole();
    receiver = await startReceiver();
    store = await rig.h.store("Watched shop");
    other = await rig.h.store("Someone else's shop");
    await installPlugin(rig.h, store.id, "echo", ECHO_PLUGIN);
    await installPlugin(rig.h, store.id, "pay", SIGNED_PLUGIN);
    await rig.h.services.console.addUser("other@example.com", PASSWORD, [other.id]);
    const r = await deliver(rig.h, store.id, "echo", JSON.stringify({ note: `${SCRIPT} ${IMG}`, link: JS_URL }), { "x-evil": IMG, "x-link": JS_URL, "x-script": SCRIPT });
    expectStatus(r, 200);
    hostileId = String(r.headers["x-delivery-id"]);
    await signIn(rig);
  });
  after(async () => {
    await receiver?.close();
    await rig?.close();
  });

  test("a delivery's hostile body, headers and logs are shown as text, run nothing, and the page has the CSP", async () => {
    const { page, base } = rig;
    const response = await page.goto(`${base}/console/stores/${store.id}/deliveries/${hostileId}`);
    assert.match(response!.headers()["content-security-policy"] ?? "", /script-src 'self'/);
    assert.doesNotMatch(response!.headers()["content-security-policy"] ?? "", /unsafe-inline/);
    const view = page.locator('[data-testid="delivery"]');
    await view.waitFor();
    const body = await page.locator('[data-testid="body"]').textContent();
    assert.ok(body!.includes(SCRIPT) && body!.includes(JS_URL), `body shown as text: ${body}`);
    const headers = await page.locator('[data-testid="headers"]').textContent();
    assert.ok(headers!.includes(IMG) && headers!.includes(JS_URL) && headers!.includes(SCRIPT), "headers shown as text");
    const logs = await page.locator("table.logs").textContent();
    assert.ok(logs!.includes(IMG) && logs!.includes(SCRIPT), "plugin logs shown as text");
    await page.getByText(IMG).first().waitFor(); // visible to the reader, as typed
    assert.equal(await view.locator("img").count(), 0, "no img element inside the delivery view");
    assert.equal(await view.locator("script").count(), 0);
    assert.equal(await page.locator('a[href^="javascript:"]').count(), 0);
    assert.equal(await page.evaluate(PWNED), undefined);
    // The hex view of the same bytes.
    await page.locator('[data-testid="body"]').waitFor();
    await page.getByRole("button", { name: "Hex" }).click();
    assert.match((await page.locator('[data-testid="body"]').textContent())!, /^00000000 {2}7b 22 6e 6f/);
    await screenshot(page, "delivery");
    assert.equal(await page.evaluate(PWNED), undefined);
  });

  test("a body that is not UTF-8 opens as a hex dump, with base64 beside it", async () => {
    const { page, base } = rig;
    const bytes = Buffer.from([0x00, 0xff, 0xfe, 0x3c, 0x62, 0x3e, 0x80]);
    const r = await deliver(rig.h, store.id, "echo", bytes, { "content-type": "application/octet-stream" });
    await page.goto(`${base}/console/stores/${store.id}/deliveries/${String(r.headers["x-delivery-id"])}`);
    const body = page.locator('[data-testid="body"]');
    await body.waitFor();
    assert.equal(await body.textContent(), `00000000  ${"00 ff fe 3c 62 3e 80".padEnd(47)}  |...<b>.|`);
    assert.equal(await page.getByRole("button", { name: "Text" }).count(), 0, "no text view of bytes that are not text");
    await page.getByText("7 bytes, not UTF-8").waitFor();
    await page.getByRole("button", { name: "Base64" }).click();
    assert.equal(await body.textContent(), bytes.toString("base64"));
    assert.equal(await page.locator('[data-testid="delivery"] b').count(), 0);
  });

  test("replay from the delivery's page records a new delivery and links to it", async () => {
    const { page, base } = rig;
    await page.goto(`${base}/console/stores/${store.id}/deliveries/${hostileId}`);
    await page.getByTestId("replay").click();
    const link = page.getByTestId("replay-link");
    await link.waitFor();
    const newId = (await link.textContent())!;
    assert.notEqual(newId, hostileId);
    await link.click();
    await page.waitForURL(`**/deliveries/${newId}`);
    await page.locator('[data-testid="delivery"]').getByText("Replay of").waitFor();
    assert.ok((await page.locator('[data-testid="delivery"]').textContent())!.includes(hostileId), "the replay names the original");
    assert.equal(await page.evaluate(PWNED), undefined);
  });

  test("the log lists deliveries with filters, and the live view shows a delivery posted while the page is open", async () => {
    const { page, base } = rig;
    await page.goto(`${base}/console/stores/${store.id}/deliveries`);
    await page.locator(`[data-testid="deliveries"] tr[data-delivery-id="${hostileId}"]`).waitFor();
    await page.getByTestId("live-toggle").check();
    await textIs(page, '[data-testid="live-state"]', "live");
    await new Promise((r) => setTimeout(r, 1_200)); // the stream's first poll has passed
    const r = await deliver(rig.h, store.id, "echo", `{"live":true}`);
    const liveId = String(r.headers["x-delivery-id"]);
    await page.locator(`[data-testid="deliveries"] tbody tr[data-delivery-id="${liveId}"]`).waitFor({ timeout: 8_000 });
    assert.equal(await page.locator('[data-testid="deliveries"] tbody tr').first().getAttribute("data-delivery-id"), liveId, "new ones come first");
    await screenshot(page, "deliveries");
    await page.getByTestId("live-toggle").uncheck();

    await page.locator('select[name="outcome"]').selectOption("plugin_error");
    await page.getByRole("button", { name: "Filter" }).click();
    await textIs(page, '[data-testid="list-status"]', "No deliveries match.");
    assert.match(page.url(), /outcome=plugin_error/);
  });

  test("the events page shows an invoice event and its attempts, and re-send makes a new attempt", async () => {
    const { page, base, h } = rig;
    const ep = await h.admin("POST", `/api/admin/stores/${store.id}/endpoints`, { url: receiver.url, types: ["invoice.completed"], description: "fulfilment" });
    expectStatus(ep, 201);
    const customer = await h.customer(store.id);
    const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "var-1", quantity: 1, price: 10 }] });
    expectStatus(await deliverSigned(h, store.id, { type: "paid", invoiceId: invoice.id }), 200);
    assert.equal(await h.services.dispatcher.runDue(), 1);
    assert.equal(receiver.received.length, 1);

    await page.goto(`${base}/console/stores/${store.id}/events`);
    const row = page.locator('[data-testid="events"] tr[data-event-id]').filter({ hasText: "invoice.completed" });
    await row.waitFor();
    assert.ok((await row.textContent())!.includes(invoice.id));
    await row.getByTestId("show-event").click();
    const detail = page.getByTestId("event-detail");
    await detail.locator(".event-json").getByText(`"id": "${invoice.id}"`, { exact: false }).first().waitFor();
    const attemptRows = detail.locator('[data-testid="event-attempts"] tbody tr');
    await rowCount(page, '[data-testid="event-attempts"] tbody tr', 1);
    assert.match((await attemptRows.first().textContent())!, /#1.*succeeded.*200/);

    await detail.getByTestId("resend").click();
    await detail.getByTestId("resend-result").getByText("Queued to 1 endpoint.").waitFor();
    // The dispatcher `serve` runs is the test's to drive here.
    assert.equal(await h.services.dispatcher.runDue(), 1);
    await rowCount(page, '[data-testid="event-attempts"] tbody tr', 2);
    assert.equal(receiver.received.length, 2);
    assert.equal(receiver.received[1]!.id, receiver.received[0]!.id, "the same webhook-id");
    await screenshot(page, "events");

    // The endpoint's own page lists the same two attempts.
    await page.locator("header nav a", { hasText: "Endpoints" }).click();
    await page.locator('[data-testid="endpoints"]').getByText(receiver.url).first().waitFor();
    await page.locator('[data-testid="endpoint-attempts"]').click();
    await rowCount(page, "article.endpoint tr[data-attempt-id]", 2);
    assert.deepEqual(rig.problems, []);
  });

  test("a login cannot open another store's deliveries: the API answers 404 and the page says not found", async () => {
    const context = await rig.browser.newContext();
    const page = await context.newPage();
    try {
      const own = { ...rig, context, page };
      await signIn(own, { email: "other@example.com", password: PASSWORD });
      const api = await page.request.get(`${rig.base}/api/admin/stores/${store.id}/deliveries/${hostileId}`);
      assert.equal(api.status(), 404);
      assert.equal(((await api.json()) as { error: { code: string } }).error.code, "store_not_found");
      assert.equal((await page.request.get(`${rig.base}/api/admin/stores/${store.id}/deliveries`)).status(), 404);
      assert.equal((await page.request.get(`${rig.base}/console/api/stores/${store.id}/deliveries/stream`)).status(), 404);
      await page.goto(`${rig.base}/console/stores/${store.id}/deliveries/${hostileId}`);
      // The shell answers before the page: the store is not among the login's.
      await page.getByRole("heading", { name: "Not found" }).waitFor();
      assert.equal(await page.getByText(IMG).count(), 0, "nothing of the delivery is shown");
      await screenshot(page, "delivery-not-found");
    } finally {
      await context.close();
    }
  });
});
