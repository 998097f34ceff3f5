// What a payment writes, as the values its statements bind (payment.apply.ts builds them; SQLite writes them
// one statement after another there, PostgreSQL as one statement in payment.postgres.ts).
import type { Insertable } from "kysely";
import type { AppliedEventsTable } from "../platform/db/schema.ts";
import type { TransitionPlan } from "../invoices/invoice-transitions.ts";
import type { InvoiceStatus } from "../schemas/invoices.schemas.ts";
import type { NewEventRow } from "../events/events.repository.ts";
import type { EventType } from "../events/events.types.ts";
import type { DeliveryRow } from "./deliveries.repository.ts";

/** The event's claim: its key, taken by the delivery that applies it. */
export type ClaimRow = Insertable<AppliedEventsTable>;
export type LogRow = TransitionPlan["lines"][number];
/** The compare-and-set of the invoice's status. */
export interface Change {
  store_id: string;
  invoice_id: string;
  status_from: InvoiceStatus;
  status_to: InvoiceStatus;
  at: number;
}
export interface FanOut {
  id: string;
  storeId: string;
  type: EventType;
  at: number;
}

/** A payment's writes; a part left null (or no lines) is not written. */
export interface WriteValues {
  claim: ClaimRow | null;
  change: Change | null;
  lines: LogRow[];
  event: NewEventRow | null;
  fanOut: FanOut | null;
  record: DeliveryRow | null;
}

export interface Written {
  /** False when the claim was taken by another delivery of the event meanwhile. */
  claimed: boolean;
  /** False when the compare-and-set found the status moved. */
  changed: boolean;
  /** The endpoints the event's deliveries were queued for. */
  endpoints: string[];
}
