// Pending invoices for the webhook and events benchmarks: five per customer, as a store's buyers have
// them (one customer holding them all would make every payment rebuild a read-model document of tens of
// thousands of invoices), with their read-model documents built as a seed builds them.
import { newId } from "../../src/lib/ids.ts";
import { rebuildReadModel } from "../../src/readmodel/documents.ts";
import type { Services } from "../../src/services.ts";

const INVOICES_PER_CUSTOMER = 5;

export async function seedPendingInvoices(services: Services, storeId: string, total: number): Promise<string[]> {
  const customerIds: string[] = [];
  for (let i = 0; i < Math.ceil(total / INVOICES_PER_CUSTOMER); i++) customerIds.push((await services.customers.create(storeId, { email: `bench${i}@example.com` })).id);
  const invoiceIds: string[] = [];
  const t0 = Date.now();
  for (let i = 0; i < total; i += 500) {
    const batch = Array.from({ length: Math.min(500, total - i) }, (_, j) => ({
      id: newId("inv"),
      store_id: storeId,
      customer_id: customerIds[Math.floor((i + j) / INVOICES_PER_CUSTOMER)]!,
      total_cents: 4999,
      payment_method: "stripe",
      displayed_payment_info: "",
      created_on_session_id: "ses_bench",
      left_feedback: 0,
      status: "pending",
      discord_id: null,
      discord_email: null,
      created_at: t0 + i + j,
      updated_at: t0 + i + j,
    }));
    await services.db.kysely.insertInto("invoices").values(batch).execute();
    invoiceIds.push(...batch.map((b) => b.id));
  }
  await rebuildReadModel(services.db.kysely, storeId);
  return invoiceIds;
}
