// Endpoints managed in the console at Svix's level (issue 31, item 9), in a real browser: add one and see
// its secret once, edit it, disable and enable it, reveal and rotate the secret, send a test event and read
// the receiver's 500 answer (headers and body), read each attempt's answer, and recover failed deliveries.
import assert from "node:assert/strict";
import { sql } from "kysely";
import { after, before, describe, test } from "node:test";
import { browserSkip, type ConsoleRig, screenshot, signIn, startConsole } from "../helpers/browser.ts";
import { startReceiver, type Receiver } from "../helpers/receiver.ts";

describe("endpoints in the browser", { skip: browserSkip }, () => {
  let rig: ConsoleRig;
  let receiver: Receiver;
  let store: { id: string };
  const card = () => rig.page.locator("article.endpoint").first();
  const tool = (testid: string) => card().locator(`[data-testid="${testid}"]`);
  before(async () => {
    rig = await startConsole();
    receiver = await startReceiver();
    store = await rig.h.store("Endpoint shop");
    await signIn(rig);
  });
  after(async () => {
    await receiver?.close();
    await rig?.close();
  });

  test("add an endpoint: its signing secret is shown with a copy button, and reveal shows the same secret later", async () => {
    const { page } = rig;
    await page.goto(`${rig.base}/console/stores/${store.id}/endpoints`);
    await page.locator("#add-endpoint-url").fill(receiver.url);
    await page.locator("#add-endpoint-description").fill("fulfilment");
    await page.locator('form.endpoint-form input[value="invoice.completed"]').check();
    await page.locator('form.endpoint-form button[type="submit"]').click();
    await card().waitFor();
    const shown = (await page.locator('[role="status"] code').innerText()).trim();
    assert.match(shown, /^whsec_/);
    assert.match((await card().textContent()) ?? "", /invoice\.completed/);
    await tool("endpoint-reveal").click();
    assert.equal((await card().locator('[data-testid="endpoint-secret"] code').innerText()).trim(), shown);
    await tool("endpoint-rotate").click({ trial: true });
    page.once("dialog", (d) => void d.accept());
    await tool("endpoint-rotate").click();
    await card().locator("text=the old one signs too").waitFor();
    assert.notEqual((await card().locator('[data-testid="endpoint-secret"] code').innerText()).trim(), shown);
    await screenshot(page, "endpoints-rotated");
  });

  test("edit an endpoint's description and types, then disable and enable it", async () => {
    const { page } = rig;
    await tool("endpoint-edit").click();
    await card().locator('input[name="description"]').fill("fulfilment, edited");
    await card().locator('input[value="invoice.refunded"]').check();
    await card().locator('form.endpoint-form button[type="submit"]').click();
    await card().locator("text=fulfilment, edited").waitFor();
    assert.match((await card().textContent()) ?? "", /invoice\.completed, invoice\.refunded/);
    await tool("endpoint-toggle").click();
    await card().locator(".badge.bad", { hasText: "disabled" }).waitFor();
    await tool("endpoint-toggle").click();
    await card().locator(".badge.ok", { hasText: "enabled" }).waitFor();
    await page.locator("h1", { hasText: "Endpoints" }).waitFor();
  });

  test("a test event shows the receiver's answer: a 500 with its headers and body", async () => {
    receiver.mode = { kind: "status", status: 500, body: Buffer.from("receiver broke: NullPointerException") };
    await card().locator('select[name="test-type"]').selectOption("invoice.completed");
    await tool("endpoint-test").click();
    const answer = card().locator('[data-testid="test-answer"]');
    await answer.waitFor();
    const text = await answer.innerText();
    assert.match(text, /HTTP 500/);
    assert.match(text, /content-type: text\/plain/);
    assert.match(text, /receiver broke: NullPointerException/);
    await screenshot(rig.page, "endpoints-test-500");
  });

  test("each attempt shows the receiver's status, headers and body; recover sends the failed ones again", async () => {
    const { page, h } = rig;
    const customer = await h.customer(store.id);
    const invoice = await h.checkout(store.id, { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "v", quantity: 1, price: 5 }] });
    await sql`update invoices set status = 'completed' where id = ${invoice.id}`.execute(h.services.db.kysely);
    await h.admin("POST", `/api/admin/stores/${store.id}/invoices/${invoice.id}/refund`, {});
    await h.services.dispatcher.runDue();
    await tool("endpoint-attempts").click();
    const first = card().locator("details.answer").first();
    await first.locator("summary").click();
    assert.match(await first.locator("pre").innerText(), /HTTP 500[\s\S]*receiver broke/);
    await sql`update event_deliveries set status = 'failed'`.execute(h.services.db.kysely);
    receiver.mode = { kind: "ok" };
    await card().locator('input[name="since"]').fill("2000-01-01T00:00:00");
    await tool("endpoint-recover").click();
    await card().locator('[data-testid="recover-result"]', { hasText: "1 event queued again" }).waitFor();
    await screenshot(page, "endpoints-recovered");
    assert.deepEqual(rig.problems, []);
  });
});
