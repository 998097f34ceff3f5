// Step 3 of a payment on its own: what a plugin run's outcome means, as a value, before anything is written.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { test } from "node:test";
import { decide } from "../../src/payments/payment.decide.ts";
import type { RunOutcome } from "../../src/sandbox/index.ts";

const body = Buffer.from('{"id":"evt_1"}');
const ran = (result: unknown): RunOutcome => ({ ok: true, result: result as never, logs: [], fetches: [], durationMs: 1 });
const failed = (kind: string, message = "boom"): RunOutcome => ({ ok: false, error: { kind: kind as never, message }, logs: [], fetches: [], durationMs: 1 });

test("pushInvoice with an eventId is applied once by that id; without one, by the body's SHA-256", () => {
  assert.deepEqual(decide(ran({ status: "pushInvoice", invoiceId: "inv_1", eventId: "e9" }), null, body), {
    kind: "apply",
    result: { status: "pushInvoice", invoiceId: "inv_1", eventId: "e9" },
    action: "pushInvoice",
    invoiceId: "inv_1",
    eventKey: "id:e9",
  });
  const hash = createHash("sha256").update(body).digest("hex");
  assert.equal((decide(ran({ status: "disputeInvoice", invoiceId: "inv_1" }), null, body) as { eventKey: string }).eventKey, `sha256:${hash}`);
});

test("an eventId with a NUL byte is known by its bytes in hex, apart from every id: key", () => {
  const key = (eventId: string) => (decide(ran({ status: "pushInvoice", invoiceId: "inv_1", eventId }), null, body) as { eventKey: string }).eventKey;
  assert.equal(key("e\u00009"), "idx:650039");
  assert.equal(key("e\u00009"), key("e\u00009"), "the same id, the same key");
  assert.notEqual(key("e\u00009"), key("e\u00008"));
  assert.equal(key("650039"), "id:650039", "an id that spells the hex is another key");
});

test("ignore names its invoice when the plugin gave one, and changes nothing", () => {
  assert.deepEqual(decide(ran({ status: "ignore" }), null, body), { kind: "ignore", result: { status: "ignore" }, invoiceId: null });
  assert.equal((decide(ran({ status: "ignore", invoiceId: "inv_2" }), null, body) as { invoiceId: string }).invoiceId, "inv_2");
});

test("a failed run is answered with its error: a rejection 401 and unverified, a timeout 504 without its message, a crash 500", () => {
  const rejected = decide(failed("rejected"), { kind: "rejected", message: "bad signature" }, body);
  assert.deepEqual(rejected, { kind: "failed", status: 401, code: "webhook_rejected", outcome: "rejected", message: "Rejected by the plugin: bad signature", verified: false });
  const timeout = decide(failed("timeout"), { kind: "timeout", message: "cpu" }, body);
  assert.deepEqual([timeout.kind === "failed" && timeout.status, timeout.kind === "failed" && timeout.message], [504, "The plugin did not finish within its time limit"]);
  const crash = decide(failed("script_error"), { kind: "script_error", message: "[secret] leaked?" }, body);
  assert.deepEqual([crash.kind === "failed" && crash.status, crash.kind === "failed" && crash.message], [500, "Plugin failed (script_error): [secret] leaked?"], "the message shown is the scrubbed one");
  const busy = decide(failed("busy"), { kind: "busy", message: "queue full" }, body);
  assert.deepEqual([busy.kind === "failed" && busy.status, busy.kind === "failed" && busy.verified], [503, true]);
});
