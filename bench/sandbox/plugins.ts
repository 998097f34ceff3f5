// The benchmark's Stripe-style plugin, once as a sandboxed Lua script and once as the same logic in
// plain TypeScript: read Stripe-Signature, HMAC over "<timestamp>.<body>", compare in constant
// time, decode the JSON body, return pushInvoice with the invoice id from it. `hash` is sha256
// (Stripe) or sha1 (the variant nginx's ngx.hmac_sha1 can compute, for the nginx reference).
import crypto from "node:crypto";
import { readFileSync } from "node:fs";

export type Hash = "sha256" | "sha1";

export const SECRET = "whsec_benchmark_secret_0123456789";
export const TIMESTAMP = "1718900000";
export const EVENT_BODY = readFileSync(new URL("./stripe-event.json", import.meta.url));
export const INVOICE_ID = (JSON.parse(EVENT_BODY.toString()) as { data: { object: { metadata: { invoiceId: string } } } }).data.object.metadata.invoiceId;

export function luaPlugin(hash: Hash): string {
  return `
local header = request.headers["stripe-signature"]
if header == nil then reject("missing Stripe-Signature") end
local t = header:match("t=(%d+)")
local v1 = header:match("v1=(%x+)")
if t == nil or v1 == nil then reject("malformed Stripe-Signature") end
local expected = hmacShaSign(secrets.signingSecret, t .. "." .. request.body, "${hash}")
if not timingSafeEqual(expected, v1) then reject("signature mismatch") end
local event = json.decode(request.body)
if type(event) ~= "table" then reject("body is not JSON") end
return { status = "pushInvoice", invoiceId = event.data.object.metadata.invoiceId }
`;
}

export const TRIVIAL = `return { status = "ignore" }`;

export type TsResult = { ok: true; status: "pushInvoice"; invoiceId: string } | { ok: false; status: 401; message: string };

/** The same plugin written directly in TypeScript. */
export function tsPlugin(hash: Hash, headers: Record<string, string | string[] | undefined>, body: Buffer, secret: string): TsResult {
  const header = headers["stripe-signature"];
  if (typeof header !== "string") return { ok: false, status: 401, message: "missing Stripe-Signature" };
  const t = /t=(\d+)/.exec(header)?.[1];
  const v1 = /v1=([0-9a-fA-F]+)/.exec(header)?.[1];
  if (t === undefined || v1 === undefined) return { ok: false, status: 401, message: "malformed Stripe-Signature" };
  const expected = crypto.createHmac(hash, secret).update(`${t}.`).update(body).digest("hex");
  const a = Buffer.from(expected);
  const b = Buffer.from(v1);
  if (a.length !== b.length || !crypto.timingSafeEqual(a, b)) return { ok: false, status: 401, message: "signature mismatch" };
  let event: { data: { object: { metadata: { invoiceId: string } } } };
  try {
    event = JSON.parse(body.toString("utf8")) as typeof event;
  } catch {
    return { ok: false, status: 401, message: "body is not JSON" };
  }
  return { ok: true, status: "pushInvoice", invoiceId: event.data.object.metadata.invoiceId };
}

export function signature(hash: Hash): string {
  const mac = crypto.createHmac(hash, SECRET).update(`${TIMESTAMP}.`).update(EVENT_BODY).digest("hex");
  return `t=${TIMESTAMP},v1=${mac}`;
}
