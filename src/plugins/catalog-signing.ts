// Signs a request the way a catalogue plugin's provider does, with a store's own settings: the console's
// bench runs a catalogue fixture (signed with the fixtures' test secret, so always rejected under a real
// one) or a typed body "signed with this store's secret". The secret never leaves the server; only the
// signature headers do, as the provider would send them.
import { createHmac, randomBytes } from "node:crypto";
import type { SigningScheme } from "./catalog.ts";

export interface SigningInput {
  body: Buffer;
  headers: Record<string, string>;
  settings: Record<string, string>;
  /** Unix seconds the signature is made at (the run's clock). */
  nowSeconds: number;
}

const hmac = (algorithm: string, key: string | Buffer, data: string | Buffer) => createHmac(algorithm, key).update(data);

/** NOWPayments' Node example: JSON.stringify of the object with its keys sorted, arrays as objects. */
function sortObject(value: Record<string, unknown>): Record<string, unknown> {
  return Object.keys(value)
    .sort()
    .reduce<Record<string, unknown>>((out, k) => {
      const v = value[k];
      out[k] = v && typeof v === "object" ? sortObject(v as Record<string, unknown>) : v;
      return out;
    }, {});
}

function genericHmac({ body, settings, nowSeconds }: SigningInput): Record<string, string> {
  const header = (settings.signatureHeader || "x-signature").toLowerCase();
  const algorithm = (settings.algorithm || "sha256").toLowerCase();
  const tsHeader = settings.timestampHeader ? settings.timestampHeader.toLowerCase() : null;
  const data = tsHeader === null ? body : Buffer.concat([Buffer.from(`${nowSeconds}.`), body]);
  const digest = hmac(algorithm, settings.signingSecret ?? "", data).digest(settings.encoding === "base64" ? "base64" : "hex");
  return { [header]: `${settings.signaturePrefix ?? ""}${digest}`, ...(tsHeader === null ? {} : { [tsHeader]: String(nowSeconds) }) };
}

function standardWebhooks({ body, headers, settings, nowSeconds }: SigningInput): Record<string, string> {
  const id = headers["webhook-id"] ?? headers["svix-id"] ?? `msg_${randomBytes(12).toString("hex")}`;
  const key = Buffer.from((settings.signingSecret ?? "").replace(/^whsec_/, ""), "base64");
  const signature = hmac("sha256", key, Buffer.concat([Buffer.from(`${id}.${nowSeconds}.`), body])).digest("base64");
  return { "webhook-id": id, "webhook-timestamp": String(nowSeconds), "webhook-signature": `v1,${signature}` };
}

/** The headers that carry the signature; they replace the request's own (and drop the scheme's alternatives). */
export function signForProvider(scheme: SigningScheme, input: SigningInput): { set: Record<string, string>; drop: string[] } {
  const secret = input.settings.signingSecret ?? "";
  switch (scheme) {
    case "generic-hmac":
      return { set: genericHmac(input), drop: [] };
    case "stripe": {
      const v1 = hmac("sha256", secret, Buffer.concat([Buffer.from(`${input.nowSeconds}.`), input.body])).digest("hex");
      return { set: { "stripe-signature": `t=${input.nowSeconds},v1=${v1}` }, drop: [] };
    }
    case "standard-webhooks":
      return { set: standardWebhooks(input), drop: ["svix-id", "svix-timestamp", "svix-signature"] };
    case "coinbase-commerce":
      return { set: { "x-cc-webhook-signature": hmac("sha256", secret, input.body).digest("hex") }, drop: [] };
    case "nowpayments": {
      let parsed: unknown;
      try {
        parsed = JSON.parse(input.body.toString("utf8"));
      } catch {
        parsed = null;
      }
      const data = parsed !== null && typeof parsed === "object" ? JSON.stringify(sortObject(parsed as Record<string, unknown>)) : input.body;
      return { set: { "x-nowpayments-sig": hmac("sha512", secret, data).digest("hex") }, drop: [] };
    }
  }
}
