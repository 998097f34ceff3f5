// The versioning benchmark's server process: a customers page of the read API's size (~260 KiB) sent from
// memory through the list route's response schema, on a bare Fastify app with the versioning hooks
// installed (`on`) or not (`off`). The `on` app also knows a bench-only older version that renames a field,
// so that pinned requests measure the reshaping path. Started by run.ts with fork().
import Fastify, { type FastifyInstance } from "fastify";
import { Type } from "typebox";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { CustomerSchema, ListCustomersSchema } from "../../src/schemas/customers.schemas.ts";
import { CustomerInvoiceSchema, InvoiceSchema } from "../../src/schemas/invoices.schemas.ts";
import { ErrorSchema } from "../../src/schemas/common.schemas.ts";
import { findVersion, registerVersion } from "../../src/versioning/registry.ts";
import { installVersioning } from "../../src/versioning/versioning.hook.ts";

export const PAGE_PATH = "/api/service/customers";
export const OLD_VERSION = "2026-06-01";
export const TINY_PATH = "/api/service/ping";

export interface ServerReady {
  port: number;
  bytes: number;
}

const iso = (i: number) => new Date(Date.UTC(2024, 0, 1) + i * 3_600_000).toISOString();

/** 100 customers with 5 invoices, 3 sessions and 2 reviews each: the size of a seeded read-API page. */
export function page(): { data: { customers: unknown[] }; pagination: { limit: number; nextCursor: string | null } } {
  const customers = Array.from({ length: 100 }, (_, c) => ({
    id: `cus_${String(c).padStart(20, "0")}`,
    totalOrders: 3,
    lastOrderDate: iso(c + 50),
    firstOrderDate: iso(c),
    totalSpent: 149.97,
    email: `customer.${c}@example.com`,
    createdAt: iso(c),
    storeCustomerDiscordAccount: c % 2 === 0 ? { discordId: `${100000000000000000 + c}`, email: `discord.${c}@example.com` } : null,
    reviews: Array.from({ length: 2 }, (_, r) => ({
      id: `rev_${c}_${r}_abcdefghijkl`,
      rating: 4,
      text: "Delivered at once, the key worked on the first try. Would buy again from this store.",
      productId: `prod_${(c * 7 + r) % 50}`,
      createdAt: iso(c + r),
    })),
    customerSessions: Array.from({ length: 3 }, (_, s) => ({
      ip: `203.0.113.${(c + s) % 250}`,
      userAgent: "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36",
      country: "DE",
      lastUsedAt: iso(c + s + 1),
      createdAt: iso(c + s),
    })),
    invoices: Array.from({ length: 5 }, (_, i) => ({
      id: `inv_${c}_${i}_abcdefghijklmnop`,
      totalInUsd: 49.99,
      paymentMethod: "stripe",
      displayedPaymentInfo: "visa •••• 4242",
      createdOnSessionId: `ses_${c}_${i % 3}_abcdefghijkl`,
      leftFeedback: i % 2 === 0,
      status: i < 3 ? "completed" : "pending",
      createdAt: iso(c + i),
    })),
  }));
  return { data: { customers }, pagination: { limit: 100, nextCursor: "eyJjIjoxNzA0MDY3MjAwMDAwLCJpIjoiY3VzXzAwMDAwMDAwMDAwMDAwMDAwMDk5In0" } };
}

/** The page's app, with or without the versioning hooks (the bench-only old version registered once). */
export async function pageApp(mode: "on" | "off"): Promise<FastifyInstance> {
  const app = Fastify({ logger: false }).withTypeProvider<TypeBoxTypeProvider>();
  for (const schema of [ErrorSchema, CustomerInvoiceSchema, InvoiceSchema, CustomerSchema]) app.addSchema(schema);
  if (mode === "on") {
    if (findVersion(OLD_VERSION) === null) registerVersion({
      version: OLD_VERSION,
      summary: "bench only: customers' email was emailAddress",
      deprecatedAt: new Date("2026-11-23T00:00:00Z"),
      sunsetAt: new Date("2027-11-23T00:00:00Z"),
      responseRoutes: [`GET /api/{namespace}/customers`],
      transformResponse(route, body) {
        if (route.status !== 200) return body;
        for (const customer of (body as { data: { customers: Record<string, unknown>[] } }).data.customers) {
          customer.emailAddress = customer.email;
          delete customer.email;
        }
        return body;
      },
    });
    installVersioning(app, { apiNamespace: "service" });
  }
  const body = page();
  app.get(PAGE_PATH, { schema: { response: ListCustomersSchema.response } }, async () => body);
  // A tiny answer, where the hooks' fixed cost per request is the largest share.
  app.get(TINY_PATH, { schema: { response: { 200: Type.Object({ status: Type.String() }) } } }, async () => ({ status: "ok" }));
  await app.ready();
  return app;
}

async function start(mode: "on" | "off"): Promise<void> {
  const app = await pageApp(mode);
  await app.listen({ port: 0, host: "127.0.0.1" });
  const address = app.server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  const bytes = (await app.inject({ method: "GET", url: PAGE_PATH })).rawPayload.length;
  process.send!({ port, bytes } satisfies ServerReady);
  // run.ts asks for the process's CPU time before and after each load: CPU per request is steadier than
  // throughput on a shared machine.
  process.on("message", (m: unknown) => {
    if (m === "cpu") {
      const u = process.cpuUsage();
      process.send!({ cpuMicros: u.user + u.system });
    }
  });
  process.once("SIGTERM", () => {
    app
      .close()
      .then(() => process.exit(0))
      .catch(() => process.exit(1));
  });
}

// Only when forked by run.ts (inject.ts imports pageApp from here).
if (process.send !== undefined) process.once("message", (mode: "on" | "off") => {
  start(mode).catch((err: unknown) => {
    process.stderr.write(`benchmark server failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  });
});
