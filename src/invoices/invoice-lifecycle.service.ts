// The merchant's and the clock's side of an invoice's life: cancel a pending invoice, mark a completed or
// disputed one refunded, and expire pending invoices whose payment window (INVOICE_PAYMENT_WINDOW_MINUTES)
// has elapsed. Each goes through the one state machine and transition function, is logged on the
// invoice, and happens once: a second cancel (or a concurrent one that lost) is refused, not repeated.
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { AppError } from "../errors.ts";
import type { DurableCommitter } from "../platform/db/durable.ts";
import { expireBatch, retryingTransitions, transitionInTransaction } from "./invoice-transitions.ts";
import type { InvoicesRepository } from "../readmodel/invoice-documents.ts";
import type { Invoice } from "../schemas/invoices.schemas.ts";
import { createStoresRepository } from "../stores/stores.repository.ts";

/** Who asked, for the log line: the admin API or the command line. */
export type Actor = "admin API" | "command line";

export interface MerchantActionInput {
  reason?: string;
  actor: Actor;
}

export interface ExpiryPass {
  expired: number;
  batches: number;
}

export interface InvoiceLifecycleService {
  /** pending → cancelled. */
  cancel(storeId: string, invoiceId: string, input: MerchantActionInput): Promise<Invoice>;
  /** completed or disputed → refunded. */
  refund(storeId: string, invoiceId: string, input: MerchantActionInput): Promise<Invoice>;
  /** Expires every pending invoice past its payment window, in batches; 0 when the window is off. */
  expireDue(options?: { batchSize?: number }): Promise<ExpiryPass>;
}

export interface LifecycleDeps {
  db: Kysely<Database>;
  dialect: "sqlite" | "postgres";
  invoices: InvoicesRepository;
  /** The merchant's cancel and refund commit durably, as payments do. */
  committer: DurableCommitter;
  /** 0 turns expiry off. */
  paymentWindowMinutes: number;
  now: () => number;
}

// Small enough that a batch holds SQLite's single writer for tens of milliseconds only (webhooks wait behind it).
const DEFAULT_BATCH = 100;

export function createInvoiceLifecycleService(deps: LifecycleDeps): InvoiceLifecycleService {
  const { db, invoices, now } = deps;
  const stores = createStoresRepository(db);

  async function merchantAction(storeId: string, invoiceId: string, action: "cancel" | "refund", by: MerchantActionInput): Promise<Invoice> {
    if (!(await stores.storeExists(storeId))) throw new AppError("store_not_found", `No store ${storeId}`, { param: "storeId" });
    const verb = action === "cancel" ? "Cancelled" : "Refunded";
    const reason = by.reason?.trim();
    const input = {
      storeId,
      invoiceId,
      action,
      describe: (from: string, to: string) => ({
        log: `${verb} by the merchant (${by.actor})${reason ? `: ${reason}` : ""}: ${from} -> ${to}`,
        type: action === "cancel" ? "info" : "warning",
      }),
    };
    const result = await retryingTransitions((work) => deps.committer.run(work), (tx) => transitionInTransaction(tx, input, now), `invoice ${invoiceId}`);
    switch (result.kind) {
      case "not_found":
        throw new AppError("invoice_not_found", `No invoice ${invoiceId} in store ${storeId}`, { param: "invoiceId" });
      case "already":
        throw new AppError("invalid_transition", `Invoice ${invoiceId} is already ${result.status}`, { details: { invoiceId, currentStatus: result.status } });
      case "invalid":
        throw new AppError(
          "invalid_transition",
          `Invoice ${invoiceId} is ${result.status}; ${action === "cancel" ? "only a pending invoice can be cancelled" : "only a completed or disputed invoice can be refunded"}`,
          { details: { invoiceId, currentStatus: result.status } },
        );
      case "changed": {
        const view = await invoices.findView(storeId, invoiceId);
        if (!view) throw new Error(`invoice ${invoiceId} vanished after ${action}`);
        return view;
      }
    }
  }

  return {
    cancel: (storeId, invoiceId, input) => merchantAction(storeId, invoiceId, "cancel", input),
    refund: (storeId, invoiceId, input) => merchantAction(storeId, invoiceId, "refund", input),

    async expireDue(options = {}) {
      const pass: ExpiryPass = { expired: 0, batches: 0 };
      if (deps.paymentWindowMinutes === 0) return pass;
      const limit = options.batchSize ?? DEFAULT_BATCH;
      const minutes = deps.paymentWindowMinutes;
      for (;;) {
        const batch = await expireBatch(
          db,
          {
            createdBefore: now() - minutes * 60_000,
            limit,
            skipLocked: deps.dialect === "postgres",
            describe: (from, to) => ({ log: `Payment window elapsed (${minutes} min without payment): ${from} -> ${to}`, type: "info" }),
          },
          now,
        );
        pass.batches++;
        pass.expired += batch.expired.length;
        // A short batch is the last one; a batch that changed nothing would only repeat itself.
        if (batch.claimed < limit || batch.expired.length === 0) return pass;
      }
    },
  };
}
