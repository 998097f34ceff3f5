// The event types (docs/events.md, "Events") and the shapes an event has on the wire (feed and webhooks alike).
import type { Invoice, InvoiceStatus } from "../schemas/invoices.schemas.ts";

export const INVOICE_EVENT_TYPES = [
  "invoice.created",
  "invoice.completed",
  "invoice.disputed",
  "invoice.expired",
  "invoice.cancelled",
  "invoice.refunded",
] as const;
export const EVENT_TYPES = [...INVOICE_EVENT_TYPES, "delivery.failed"] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** The API version events are rendered in unless an endpoint remembers another (README, "API versions"). */
export const CURRENT_API_VERSION = "2026-11-23";

export function isEventType(value: string): value is EventType {
  return (EVENT_TYPES as readonly string[]).includes(value);
}

/** The event an invoice entering `status` produces: `pending` is entered only at checkout. */
export function invoiceEventType(status: InvoiceStatus): EventType {
  return status === "pending" ? "invoice.created" : `invoice.${status}`;
}

export interface DeliveryFailedData {
  delivery: { id: string; pluginName: string; outcome: string; status: number; error: { kind: string; message: string; line?: number } | null };
}

export type EventData = { invoice: Invoice } | DeliveryFailedData;

/** An event as stored: `data` as it was when the change committed. */
export interface StoredEvent {
  id: string;
  storeId: string;
  /** The feed's number, given after commit (null until the sequencer has numbered it). */
  seq: number | null;
  type: string;
  data: string;
  createdAt: number;
}

/** An event as the feed and the webhooks show it. */
export interface EventBody {
  id: string;
  type: string;
  createdAt: string;
  data: Record<string, unknown>;
}
