// The read-API suites' fixture and list helpers: two stores with customers and invoices at known times,
// and the customer and invoice pages as a key sees them.
import type { Harness } from "./harness.ts";
import { expectStatus } from "./harness.ts";

export interface Fixture {
  a: { id: string; key: string };
  b: { id: string; key: string };
  alice: string;
  bob: string;
  carol: string;
  inv1: Record<string, unknown> & { id: string };
  inv2: Record<string, unknown> & { id: string };
  inv3: Record<string, unknown> & { id: string };
  otherStoreInvoice: string;
  otherStoreCustomer: string;
}

/** Store A: alice (chat account, 2 invoices, one completed, a review), bob (1 completed invoice), carol (none). Store B: one of each. */
export async function buildFixture(h: Harness): Promise<Fixture> {
  const { clock } = h;
  clock.set("2023-06-01T10:00:00.000Z");
  const a = await h.store("A");
  const b = await h.store("B");
  clock.set("2023-06-10T12:00:00.000Z");
  const alice = (await h.customer(a.id, { email: "alice@example.com", discordId: "disc-alice", discordEmail: "alice@discord.example" })).id;
  clock.set("2023-06-15T14:30:00.000Z");
  const bob = (await h.customer(a.id, { email: "bob@example.com" })).id;
  clock.set("2023-07-01T00:00:00.000Z");
  const carol = (await h.customer(a.id, { email: "carol@example.com" })).id;

  clock.set("2023-06-20T08:00:00.000Z");
  const inv1 = await h.checkout(a.id, {
    customerId: alice,
    paymentMethod: "stripe",
    displayedPaymentInfo: "visa •••• 4242",
    items: [
      { productVariantId: "var-ebook", quantity: 2, price: 10.5 },
      { productVariantId: "var-course", quantity: 1, price: 99.99, couponId: "coupon-summer" },
    ],
    fields: [{ key: "minecraft_username", value: "alice_mc", type: "text" }],
    discordId: "disc-alice",
    discordEmail: "alice@discord.example",
    session: { ip: "203.0.113.7", userAgent: "Mozilla/5.0", country: "DE" },
  });
  clock.set("2023-06-25T08:00:00.000Z");
  const inv2 = await h.checkout(a.id, { customerId: alice, paymentMethod: "paypal", items: [{ productVariantId: "var-ebook", quantity: 1, price: 10.5 }] });
  clock.set("2023-07-05T09:00:00.000Z");
  const inv3 = await h.checkout(a.id, { customerId: bob, paymentMethod: "crypto", items: [{ productVariantId: "var-key", quantity: 3, price: 5 }] });

  const db = h.services.db.kysely;
  await db.updateTable("invoices").set({ status: "completed" }).where("id", "in", [inv1.id, inv3.id]).execute();
  await db
    .insertInto("reviews")
    .values({ id: "rev_alice1", store_id: a.id, customer_id: alice, rating: 5, text: "Great!", product_id: "prod-ebook", created_at: Date.parse("2023-06-21T00:00:00Z"), customer_created_at: Date.parse("2023-06-10T12:00:00.000Z") })
    .execute();

  clock.set("2023-06-12T00:00:00.000Z");
  const otherCustomer = (await h.customer(b.id, { email: "eve@example.com", discordId: "disc-eve" })).id;
  const otherInvoice = await h.checkout(b.id, { customerId: otherCustomer, paymentMethod: "stripe", items: [{ productVariantId: "var-ebook", quantity: 1, price: 1 }] });

  return { a, b, alice, bob, carol, inv1, inv2, inv3, otherStoreInvoice: otherInvoice.id, otherStoreCustomer: otherCustomer };
}

export type Json = Record<string, unknown>;
export const ids = (list: Json[]) => list.map((x) => x.id);

type Page<K extends string> = { data: Record<K, Json[]>; pagination: { limit: number; nextCursor: string | null } };

/** One page of the customer list as `key` sees it; the answer must be 200. */
export async function customersPage(h: Harness, query: string, key: string): Promise<Page<"customers">> {
  const r = await h.get(`/api/service/customers${query}`, key);
  expectStatus(r, 200);
  return r.json<Page<"customers">>();
}

/** One page of the invoice list as `key` sees it; the answer must be 200. */
export async function invoicesPage(h: Harness, query: string, key: string): Promise<Page<"invoices">> {
  const r = await h.get(`/api/service/invoices${query}`, key);
  expectStatus(r, 200);
  return r.json<Page<"invoices">>();
}
