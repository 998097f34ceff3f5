// The webhook benchmark's Stripe-style plugin, as Lua for the sandbox and as the same logic in plain
// TypeScript (answering as a sandbox run does, so the route, the store/plugin lookup and the delivery
// record around it are identical): Stripe-Signature "t=…,v1=…", HMAC-SHA256 over "t.body", constant-time
// compare, JSON decode, payment_intent.succeeded → pushInvoice(metadata.invoiceId), anything else → ignore.
import crypto from "node:crypto";

export const SECRET = "whsec_webhook_benchmark_0123456789";

export const LUA_PLUGIN = `
local header = request.headers["stripe-signature"]
if header == nil then reject("missing Stripe-Signature") end
local t = header:match("t=(%d+)")
local v1 = header:match("v1=(%x+)")
if t == nil or v1 == nil then reject("malformed Stripe-Signature") end
if not timingSafeEqual(hmacShaSign(secrets.signingSecret, t .. "." .. request.body, "sha256"), v1) then reject("signature mismatch") end
local event = json.decode(request.body)
if type(event) ~= "table" then reject("body is not JSON") end
if event.type == "payment_intent.succeeded" then
  return { status = "pushInvoice", invoiceId = event.data.object.metadata.invoiceId }
end
return { status = "ignore" }
`;

export function eventBody(type: string, invoiceId: string): string {
  return JSON.stringify({
    id: `evt_${invoiceId}`,
    object: "event",
    api_version: "2024-06-20",
    created: 1718900000,
    type,
    data: { object: { id: `pi_${invoiceId}`, object: "payment_intent", amount: 4999, amount_received: 4999, currency: "usd", status: "succeeded", metadata: { invoiceId } } },
    livemode: false,
  });
}

export function stripeSignature(body: string, t = "1718900000"): string {
  return `t=${t},v1=${crypto.createHmac("sha256", SECRET).update(`${t}.${body}`).digest("hex")}`;
}

/** What the plain-TypeScript version reads of a sandbox run's input (the service's RunInput). */
export interface RunInputLike {
  store?: { id: string };
  request: { headers: Record<string, string | undefined>; body: Buffer };
  secrets: Record<string, string | undefined>;
}

/** The same plugin logic in plain TypeScript, answering as the sandbox's run does (a RunOutcome). */
export function plainTypeScriptRun(input: RunInputLike): unknown {
  const started = performance.now();
  const base = () => ({ logs: [], fetches: [], durationMs: performance.now() - started });
  const reject = (message: string) => ({ ok: false, error: { kind: "rejected", message }, ...base() });
  const header = input.request.headers["stripe-signature"];
  const t = header && /t=(\d+)/.exec(header)?.[1];
  const v1 = header && /v1=([0-9a-fA-F]+)/.exec(header)?.[1];
  if (!t || !v1) return reject("malformed Stripe-Signature");
  const expected = crypto.createHmac("sha256", input.secrets.signingSecret ?? "").update(`${t}.`).update(input.request.body).digest("hex");
  if (expected.length !== v1.length || !crypto.timingSafeEqual(Buffer.from(expected), Buffer.from(v1))) return reject("signature mismatch");
  const event = JSON.parse(input.request.body.toString("utf8")) as { type: string; data: { object: { metadata: { invoiceId: string } } } };
  if (event.type === "payment_intent.succeeded") return { ok: true, result: { status: "pushInvoice", invoiceId: event.data.object.metadata.invoiceId }, ...base() };
  return { ok: true, result: { status: "ignore" }, ...base() };
}
