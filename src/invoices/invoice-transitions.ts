// Applies a plugin's pushInvoice / disputeInvoice to an invoice: the status change, its log line, the
// run's log lines and the delivery record commit together or not at all. The change is a compare-and-set
// on the status read, so concurrent deliveries (in one process or many on one PostgreSQL) change an
// invoice at most once; a loser re-reads and answers "already applied".
import type { Kysely, Transaction } from "kysely";
import type { Database } from "../db/schema.ts";
import { refreshReadModel } from "../lib/read-model.ts";
import { decideTransition, isInvoiceStatus, type PluginAction } from "./invoice-state.ts";
import type { InvoiceStatus } from "./invoices.schemas.ts";

export interface TransitionLogLine {
  log: string;
  type: string;
}

export type TransitionResult =
  | { kind: "changed"; from: InvoiceStatus; to: InvoiceStatus }
  | { kind: "already"; status: InvoiceStatus }
  | { kind: "invalid"; status: InvoiceStatus }
  | { kind: "not_found" };

export interface ApplyInput {
  storeId: string;
  invoiceId: string;
  action: PluginAction;
  /** The transition's own line, given the statuses. */
  describe: (from: InvoiceStatus, to: InvoiceStatus) => TransitionLogLine;
  /** The run's log() lines: appended to the invoice whatever the outcome, when the invoice exists. */
  runLogs: TransitionLogLine[];
  /** Written in the same transaction (the delivery record), once the outcome is known. */
  record?: (tx: Transaction<Database>, result: TransitionResult) => Promise<void>;
}

const MAX_ATTEMPTS = 5;

export async function applyPluginAction(db: Kysely<Database>, input: ApplyInput, now: () => number): Promise<TransitionResult> {
  for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
    const outcome = await db.transaction().execute(async (tx): Promise<TransitionResult | "retry"> => {
      const row = await tx.selectFrom("invoices").select(["status"]).where("id", "=", input.invoiceId).where("store_id", "=", input.storeId).executeTakeFirst();
      if (!row) {
        const result: TransitionResult = { kind: "not_found" };
        await input.record?.(tx, result);
        return result;
      }
      if (!isInvoiceStatus(row.status)) throw new Error(`invoice ${input.invoiceId} has unknown status ${row.status}`);
      const decision = decideTransition(row.status, input.action);
      const t = now();
      let result: TransitionResult;
      const lines: TransitionLogLine[] = [...input.runLogs];
      if (decision.kind === "change") {
        const updated = await tx
          .updateTable("invoices")
          .set({ status: decision.to, updated_at: t })
          .where("id", "=", input.invoiceId)
          .where("store_id", "=", input.storeId)
          .where("status", "=", row.status)
          .executeTakeFirst();
        if (Number(updated.numUpdatedRows) !== 1) return "retry"; // another delivery changed it first
        result = { kind: "changed", from: row.status, to: decision.to };
        lines.push(input.describe(row.status, decision.to));
      } else {
        result = decision.kind === "already" ? { kind: "already", status: row.status } : { kind: "invalid", status: row.status };
      }
      if (lines.length > 0) {
        await tx.insertInto("invoice_logs").values(lines.map((l) => ({ invoice_id: input.invoiceId, log: l.log, type: l.type, created_at: t }))).execute();
        await refreshReadModel(tx, input.storeId, input.invoiceId);
      }
      await input.record?.(tx, result);
      return result;
    });
    if (outcome !== "retry") return outcome;
  }
  throw new Error(`invoice ${input.invoiceId}: status kept changing under ${MAX_ATTEMPTS} attempts`);
}
