// The plugin workbench in a real browser (issue 31, items 1, 2, 4, 6 and 7): drafts survive leaving the
// page and a session's end (signed in again in a dialog, in place); leaving with unsaved changes asks; a
// save from a stale tab shows the conflict; completion never replaces a keyword; saving is a deploy step
// (diff against live, note, Ctrl+S, "identical to an older version"); the bench runs a recorded delivery of
// almost 1 MiB by id, signs a fixture with the store's own secret, and refreshes its saved side after a save.
import assert from "node:assert/strict";
import { sql } from "kysely";
import { after, before, beforeEach, describe, test } from "node:test";
import { browserSkip, type ConsoleRig, screenshot, signIn, startConsole } from "../helpers/browser.ts";
import { ADMIN_TOKEN, expectStatus } from "../helpers/harness.ts";
import { deliver, installPlugin } from "../helpers/webhook.ts";

const V1 = 'log("v1")\nreturn { status = "ignore" }';

describe("the plugin workbench in the browser", { skip: browserSkip }, () => {
  let rig: ConsoleRig;
  let store: { id: string };
  let n = 0;
  let plugin: string;
  const pluginPage = () => `${rig.base}/console/stores/${store.id}/plugins/${plugin}`;
  const open = async () => {
    await rig.page.goto(pluginPage());
    await rig.page.locator(".cm-content").waitFor();
  };
  const editorText = () => rig.page.locator(".cm-content").innerText();
  const typeAtEnd = async (text: string) => {
    await rig.page.locator(".cm-content").click();
    await rig.page.keyboard.press("Control+End");
    await rig.page.keyboard.type(text);
  };
  before(async () => {
    rig = await startConsole();
    store = await rig.h.store("Workbench shop");
    await signIn(rig);
  });
  beforeEach(async () => {
    plugin = `p${++n}`;
    await installPlugin(rig.h, store.id, plugin, V1, {});
  });
  after(() => rig?.close());

  test("a draft survives leaving the page: coming back offers it, and restoring puts the text back", async () => {
    const { page } = rig;
    await open();
    await typeAtEnd("\n-- kept in a draft");
    page.once("dialog", (d) => void d.accept());
    await page.locator("header nav a", { hasText: "Deliveries" }).click();
    await page.locator("h1", { hasText: "Deliveries" }).waitFor();
    await open();
    await page.locator('[data-testid="draft-restore"]').click();
    assert.match(await editorText(), /-- kept in a draft/);
    await screenshot(page, "workbench-draft-restored");
  });

  test("leaving with unsaved changes asks first, and saying no stays on the page", async () => {
    const { page } = rig;
    await open();
    await typeAtEnd("\n-- unsaved");
    let asked = "";
    page.once("dialog", (d) => {
      asked = d.message();
      void d.dismiss();
    });
    await page.locator("header nav a", { hasText: "Events" }).click();
    assert.match(asked, /unsaved changes/);
    assert.equal(new URL(page.url()).pathname, `/console/stores/${store.id}/plugins/${plugin}`);
    assert.match(await editorText(), /-- unsaved/);
  });

  test("a session that ends while typing signs in again in a dialog; the text stays and the page does not move", async () => {
    const { page, h } = rig;
    await open();
    await sql`delete from console_sessions`.execute(h.services.db.kysely);
    await typeAtEnd("\nlocal typed_after_expiry = 1");
    const dialog = page.locator('[data-testid="reauth-dialog"]');
    await dialog.waitFor();
    await screenshot(page, "workbench-reauth-dialog");
    await dialog.locator('[data-testid="signin-token"] input[name="token"]').fill(ADMIN_TOKEN);
    await dialog.locator('[data-testid="signin-token"] button').click();
    await dialog.waitFor({ state: "detached" });
    // The compile check that met the 401 ran again once signed in (code after `return` does not compile).
    await page.locator(`[data-testid="compile-status"]:has-text("expected near 'local'")`).waitFor();
    assert.equal(new URL(page.url()).pathname, `/console/stores/${store.id}/plugins/${plugin}`);
    assert.match(await editorText(), /typed_after_expiry/);
  });

  test("a save from a tab still showing an old version is refused and shows the live version beside the edit", async () => {
    const { page } = rig;
    await open();
    expectStatus(await rig.h.admin("PUT", `/api/admin/stores/${store.id}/plugins/${plugin}`, { source: `-- from tab A\n${V1}`, baseVersion: 1 }), 200);
    await typeAtEnd("\n-- from tab B");
    await page.locator('[data-testid="save"]').click();
    await page.locator('[data-testid="deploy-confirm"]').click();
    const conflict = page.locator('[data-testid="conflict"]');
    await conflict.waitFor();
    assert.match((await conflict.textContent()) ?? "", /version 2 is live now/);
    assert.match((await conflict.locator('[data-testid="conflict-diff"] .cm-content').allInnerTexts()).join("\n"), /from tab A/);
    await screenshot(page, "workbench-conflict");
    await page.locator('[data-testid="conflict-save-mine"]').click();
    await page.locator('[data-testid="editor-status"]:has-text("Saved as version 3")').waitFor();
    const live = (await rig.h.admin("GET", `/api/admin/stores/${store.id}/plugins/${plugin}`)).json<{ version: number; source: string }>();
    assert.equal(live.version, 3);
    assert.match(live.source, /from tab B/);
    // The refused save is the one error the page may report.
    assert.deepEqual(rig.problems.filter((p) => !/status of 409/.test(p)), []);
    rig.problems.length = 0;
  });

  test("typing end and Enter starts a new line (no completion replaces it); fun offers the keyword function", async () => {
    const { page } = rig;
    await open();
    await typeAtEnd("\nif true then\nend");
    await page.keyboard.press("Enter");
    await page.keyboard.type("-- next");
    const text = await editorText();
    assert.match(text, /end\n\s*-- next/);
    assert.doesNotMatch(text, /json\.encode/);
    await page.keyboard.type("\nfun");
    await page.locator(".cm-tooltip-autocomplete").waitFor();
    const options = await page.locator(".cm-tooltip-autocomplete li").allTextContents();
    assert.ok(options.some((o) => o.startsWith("function")), options.join(", "));
    assert.ok(options.every((o) => o.startsWith("fun")), `prefix matches only: ${options.join(", ")}`);
  });

  test("deploying shows the diff against the live version, takes a note kept with the version, and Ctrl+S opens it", async () => {
    const { page } = rig;
    await open();
    await typeAtEnd("\n-- deployed with a note");
    await page.keyboard.press("Control+s");
    const deploy = page.locator('[data-testid="deploy"]');
    await deploy.waitFor();
    assert.match((await deploy.locator('[data-testid="deploy-diff"] .cm-content').allInnerTexts()).join("\n"), /deployed with a note/);
    await page.locator('[data-testid="deploy-note"]').fill("explain the change");
    await screenshot(page, "workbench-deploy");
    await page.locator('[data-testid="deploy-confirm"]').click();
    await page.locator('[data-testid="editor-status"]:has-text("Saved as version 2")').waitFor();
    await page.locator('[data-testid="versions"] tr[data-version="2"]:has-text("explain the change")').waitFor();
  });

  test("saving a source identical to an older version says plainly that version is live again", async () => {
    const { page } = rig;
    expectStatus(await rig.h.admin("PUT", `/api/admin/stores/${store.id}/plugins/${plugin}`, { source: `-- v2\n${V1}`, baseVersion: 1 }), 200);
    await open();
    await page.locator(".cm-content").click();
    await page.keyboard.press("Control+A");
    await page.keyboard.insertText(V1);
    await page.locator('[data-testid="save"]').click();
    await page.locator('[data-testid="deploy-confirm"]').click();
    await page.locator('[data-testid="editor-status"]:has-text("Identical to version 1")').waitFor();
    assert.match((await page.locator('[data-testid="editor-status"]').textContent()) ?? "", /version 1 is live again/);
  });

  test("a version diff folds the unchanged code", async () => {
    const { page } = rig;
    const long = Array.from({ length: 200 }, (_, i) => `local x${i} = ${i}`).join("\n");
    await installPlugin(rig.h, store.id, plugin, `${long}\n${V1}`, {});
    await installPlugin(rig.h, store.id, plugin, `${long.replace("local x100 = 100", "local x100 = 101")}\n${V1}`, {});
    await open();
    await page.locator('[data-testid="show-diff"]').click();
    await page.locator('[data-testid="diff"] .cm-collapsedLines').first().waitFor();
    const height = (await page.locator('[data-testid="diff"]').boundingBox())!.height;
    assert.ok(height < 600, `the diff is ${height} px tall`);
    await screenshot(page, "workbench-diff-folded");
  });

  test("the bench runs a recorded delivery of almost 1 MiB by id on the server", async () => {
    const { page } = rig;
    await installPlugin(rig.h, store.id, plugin, 'log("bytes " .. #request.body)\nreturn { status = "ignore" }', {});
    const body = JSON.stringify({ pad: "y".repeat(1_000_000) });
    const sent = await deliver(rig.h, store.id, plugin, body);
    const id = String(sent.headers["x-delivery-id"]);
    await open();
    await page.locator('[data-testid="bench-deliveries"]').focus();
    await page.locator(`[data-testid="bench-deliveries"] option[value="${id}"]`).waitFor({ state: "attached" });
    await page.locator('[data-testid="bench-deliveries"]').selectOption(id);
    await page.locator(`[data-testid="bench-loaded"]:has-text("${id}")`).waitFor();
    await page.locator('[data-testid="bench-run"]').click();
    await page.locator('[data-testid="run-unsaved"] [data-testid="run-logs"]').waitFor();
    assert.match(await page.locator('[data-testid="run-unsaved"] [data-testid="run-logs"]').innerText(), new RegExp(`bytes ${Buffer.byteLength(body)}`));
    assert.match(await page.locator('[data-testid="run-saved"] [data-testid="run-logs"]').innerText(), new RegExp(`bytes ${Buffer.byteLength(body)}`));
  });

  test("a catalogue fixture signed with this store's secret verifies, and the saved side shows the new version after a save", async () => {
    const { page } = rig;
    expectStatus(await rig.h.admin("PUT", `/api/admin/stores/${store.id}/plugins/signed-${n}`, { catalog: "stripe", secrets: { signingSecret: "whsec_this_store" } }), 201);
    plugin = `signed-${n}`;
    await open();
    await page.locator('[data-testid="bench-fixtures"] option[value="checkout-session-completed"]').waitFor({ state: "attached" });
    await page.locator('[data-testid="bench-fixtures"]').selectOption("checkout-session-completed");
    await page.locator('[data-testid="bench-run"]').click();
    await page.locator('[data-testid="run-unsaved"] [data-testid="run-error"]:has-text("rejected")').waitFor();
    await page.locator('[data-testid="bench-sign"]').check();
    await page.locator('[data-testid="bench-run"]').click();
    await page.locator('[data-testid="run-unsaved"] [data-testid="run-signature"]').waitFor();
    assert.equal(await page.locator('[data-testid="run-unsaved"] [data-testid="run-error"]').count(), 0);
    await screenshot(page, "workbench-bench-signed");
    await typeAtEnd("\n-- v2 from the console");
    await page.locator('[data-testid="save"]').click();
    await page.locator('[data-testid="deploy-confirm"]').click();
    await page.locator('[data-testid="run-saved"] h3:has-text("Saved version v2")').waitFor();
    assert.deepEqual(rig.problems, []);
  });
});
