// Helpers for the events-out suites: the store's event feed, its endpoints and their attempts.
import type { Harness } from "./harness.ts";
import { expectStatus } from "./harness.ts";
import { deliverSigned } from "./webhook.ts";

export type Ev = { id: string; type: string; createdAt: string; data: { invoice?: { id: string; status: string; invoiceLogs: unknown[] }; delivery?: Record<string, unknown> } };
export type Feed = { data: { events: Ev[] }; pagination: { limit: number; nextCursor: string } };
export type Attempt = { eventId: string; attempt: number; outcome: string; responseStatus: number | null; error: string | null; responseExcerpt: string; durationMs: number };

export async function feed(h: Harness, key: string, query = ""): Promise<Feed> {
  const r = await h.get(`/api/service/events${query}`, key);
  expectStatus(r, 200);
  return r.json<Feed>();
}

/** Every event of the store, paging from the start with a small page. */
export async function allEvents(h: Harness, key: string): Promise<Ev[]> {
  const out: Ev[] = [];
  let cursor: string | null = null;
  for (;;) {
    const page: Feed = await feed(h, key, `?limit=3${cursor ? `&cursor=${cursor}` : ""}`);
    out.push(...page.data.events);
    if (page.data.events.length === 0) return out;
    cursor = page.pagination.nextCursor;
  }
}

export async function addEndpoint(h: Harness, storeId: string, body: Record<string, unknown>) {
  const r = await h.admin("POST", `/api/admin/stores/${storeId}/endpoints`, body);
  expectStatus(r, 201);
  return r.json<{ id: string; secret: string; url: string; types: string[]; enabled: boolean }>();
}

export async function attempts(h: Harness, storeId: string, endpointId: string): Promise<Attempt[]> {
  const r = await h.admin("GET", `/api/admin/stores/${storeId}/endpoints/${endpointId}/attempts`);
  expectStatus(r, 200);
  return r.json<{ data: Attempt[] }>().data.reverse(); // oldest first
}

export const paid = (h: Harness, storeId: string, invoiceId: string) => deliverSigned(h, storeId, { type: "paid", invoiceId });
