// Signs a catalogue fixture's request again with a store's real secret, the way its provider signs, so that
// `storefront plugins trigger` can post it to a running service and see it verified (the Stripe CLI's
// `trigger`): nobody writes a signing script. The fixtures' own signatures were made with test secrets;
// timestamped schemes get the current time. PayPal's deliveries are verified by PayPal's API, not by a
// shared secret, so they cannot be signed here.
import { createHmac, randomBytes } from "node:crypto";

export interface SignableRequest {
  headers: Record<string, string>;
  body: string;
}

type Signer = (request: SignableRequest, secrets: Record<string, string>, nowSeconds: number) => Record<string, string>;

const hmac = (algorithm: string, key: string | Buffer, data: string) => createHmac(algorithm, key).update(data);

/** Headers of the request without the ones a signer replaces (any case). */
function without(headers: Record<string, string>, names: string[]): Record<string, string> {
  const drop = new Set(names.map((n) => n.toLowerCase()));
  return Object.fromEntries(Object.entries(headers).filter(([k]) => !drop.has(k.toLowerCase())));
}

function need(secrets: Record<string, string>, name: string, plugin: string): string {
  const value = secrets[name];
  if (value === undefined || value === "") throw new FixtureSigningError(`the ${plugin} plugin has no ${name} secret to sign with: set it (storefront plugins install … --secret ${name}=…)`);
  return value;
}

/** NOWPayments' documented Node example: keys sorted recursively (arrays become objects, as there). */
function sortObject(obj: Record<string, unknown>): Record<string, unknown> {
  return Object.keys(obj)
    .sort()
    .reduce<Record<string, unknown>>((r, k) => {
      const v = obj[k];
      r[k] = v && typeof v === "object" ? sortObject(v as Record<string, unknown>) : v;
      return r;
    }, {});
}

const SIGNERS: Record<string, Signer> = {
  "generic-hmac": (req, secrets, now) => {
    const header = (secrets.signatureHeader || "x-signature").toLowerCase();
    const algorithm = (secrets.algorithm || "sha256").toLowerCase().replace("-", "");
    const encoding = secrets.encoding === "base64" ? "base64" : "hex";
    const timestampHeader = secrets.timestampHeader ? secrets.timestampHeader.toLowerCase() : null;
    const data = timestampHeader === null ? req.body : `${now}.${req.body}`;
    const signature = (secrets.signaturePrefix ?? "") + hmac(algorithm, need(secrets, "signingSecret", "generic-hmac"), data).digest(encoding);
    return { ...without(req.headers, [header, ...(timestampHeader ? [timestampHeader] : [])]), [header]: signature, ...(timestampHeader ? { [timestampHeader]: String(now) } : {}) };
  },
  stripe: (req, secrets, now) => {
    const v1 = hmac("sha256", need(secrets, "signingSecret", "stripe"), `${now}.${req.body}`).digest("hex");
    return { ...without(req.headers, ["stripe-signature"]), "stripe-signature": `t=${now},v1=${v1}` };
  },
  "standard-webhooks": (req, secrets, now) => {
    const secret = need(secrets, "signingSecret", "standard-webhooks");
    const key = Buffer.from(secret.startsWith("whsec_") ? secret.slice("whsec_".length) : secret, "base64");
    const id = req.headers["webhook-id"] ?? req.headers["svix-id"] ?? `msg_${randomBytes(12).toString("hex")}`;
    const signature = `v1,${hmac("sha256", key, `${id}.${now}.${req.body}`).digest("base64")}`;
    const rest = without(req.headers, ["webhook-id", "webhook-timestamp", "webhook-signature", "svix-id", "svix-timestamp", "svix-signature"]);
    return { ...rest, "webhook-id": id, "webhook-timestamp": String(now), "webhook-signature": signature };
  },
  "coinbase-commerce": (req, secrets) => {
    const signature = hmac("sha256", need(secrets, "signingSecret", "coinbase-commerce"), req.body).digest("hex");
    return { ...without(req.headers, ["x-cc-webhook-signature"]), "x-cc-webhook-signature": signature };
  },
  nowpayments: (req, secrets) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(req.body);
    } catch {
      throw new FixtureSigningError("a NOWPayments body must be JSON: its signature is over the sorted object");
    }
    const signature = hmac("sha512", need(secrets, "signingSecret", "nowpayments"), JSON.stringify(sortObject(parsed as Record<string, unknown>))).digest("hex");
    return { ...without(req.headers, ["x-nowpayments-sig"]), "x-nowpayments-sig": signature };
  },
};

export class FixtureSigningError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FixtureSigningError";
  }
}

/** The catalogue plugins whose deliveries can be signed here. */
export const SIGNABLE_CATALOG: readonly string[] = Object.keys(SIGNERS).sort();

/** The request's headers signed for `catalog` with `secrets` at `nowSeconds`; the body is unchanged. */
export function signFixtureRequest(catalog: string, request: SignableRequest, secrets: Record<string, string>, nowSeconds: number): Record<string, string> {
  const signer = SIGNERS[catalog];
  if (signer === undefined) {
    const why = catalog === "paypal" ? "PayPal's deliveries are verified by PayPal's API, not by a shared secret (use PayPal's webhook simulator)" : `no signing scheme is known for ${catalog}`;
    throw new FixtureSigningError(`cannot sign a ${catalog} delivery: ${why}; these can be: ${SIGNABLE_CATALOG.join(", ")}`);
  }
  return signer(request, secrets, nowSeconds);
}
