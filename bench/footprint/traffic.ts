// A little of everything a service does on its first day, through HTTP only, so the footprint after traffic
// includes every part that starts on demand: payment webhooks (the sandbox's workers), read pages (the
// reader threads), events, and the console's page and assets (its bundle).
import { createHmac } from "node:crypto";

const SECRET = "footprint-bench-secret";
const PLUGIN = `
local sig = request.headers["x-signature"]
if sig == nil or not timingSafeEqual(sig, hmacShaSign(secrets.key, request.body, "sha256")) then reject("bad signature") end
return { status = "pushInvoice", invoiceId = request.json.invoiceId }
`;

async function call(url: string, init: RequestInit & { token?: string } = {}): Promise<Response> {
  const headers: Record<string, string> = { "content-type": "application/json", ...(init.headers as Record<string, string> | undefined) };
  if (init.token) headers.authorization = init.token;
  const r = await fetch(url, { ...init, headers });
  if (r.status >= 400) throw new Error(`${init.method ?? "GET"} ${url}: ${r.status} ${await r.text()}`);
  return r;
}

/** Stores, plugins, payments, pages and a console visit; returns how many of each it made. */
export async function firstDay(base: string, adminToken: string, payments = 40): Promise<Record<string, number>> {
  const admin = `Bearer ${adminToken}`;
  const json = async <T>(r: Promise<Response>) => (await r).json() as Promise<T>;
  const store = await json<{ id: string }>(call(`${base}/api/admin/stores`, { method: "POST", token: admin, body: JSON.stringify({ name: "footprint" }) }));
  const key = await json<{ key: string }>(call(`${base}/api/admin/stores/${store.id}/keys`, { method: "POST", token: admin, body: "{}" }));
  await call(`${base}/api/admin/stores/${store.id}/plugins/pay`, { method: "PUT", token: admin, body: JSON.stringify({ source: PLUGIN, secrets: { key: SECRET } }) });
  const invoices: string[] = [];
  for (let i = 0; i < payments; i++) {
    const customer = await json<{ id: string }>(call(`${base}/api/admin/stores/${store.id}/customers`, { method: "POST", token: admin, body: JSON.stringify({ email: `c${i}@example.com` }) }));
    const body = { customerId: customer.id, paymentMethod: "card", items: [{ productVariantId: "var_1", quantity: 1, price: 9.99 }] };
    invoices.push((await json<{ id: string }>(call(`${base}/api/admin/stores/${store.id}/invoices`, { method: "POST", token: admin, body: JSON.stringify(body) }))).id);
  }
  // Payments from four clients at once, so more than one sandbox worker is busy.
  let next = 0;
  const payer = async () => {
    while (next < invoices.length) {
      const body = JSON.stringify({ invoiceId: invoices[next++] });
      const signature = createHmac("sha256", SECRET).update(body).digest("hex");
      await call(`${base}/api/paymentPlugins?pluginName=pay&storeId=${store.id}`, { method: "POST", body, headers: { "x-signature": signature } });
    }
  };
  await Promise.all(Array.from({ length: 4 }, payer));
  let pages = 0;
  for (let i = 0; i < 20; i++) {
    await (await call(`${base}/api/service/${i % 2 === 0 ? "customers" : "invoices"}?limit=20`, { token: key.key })).arrayBuffer();
    pages++;
  }
  await (await call(`${base}/api/service/events?limit=50`, { token: key.key })).arrayBuffer();
  const shell = await (await call(`${base}/console/`)).text();
  let assets = 0;
  for (const [, href] of shell.matchAll(/(?:href|src)="(\/console\/assets\/[^"]+)"/g)) {
    await (await call(`${base}${href}`)).arrayBuffer();
    assets++;
  }
  await (await call(`${base}/openapi.json`)).arrayBuffer();
  return { payments: invoices.length, pages, consoleAssets: assets };
}
