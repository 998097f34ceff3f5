// The outbound events in /openapi.json's `webhooks` section (OpenAPI 3.1): one entry per event type, the
// request storefront sends to a merchant's endpoint (its headers, its schema, a full example payload) and
// what the endpoint's answer means. docs/events.md says the same for people.
import { exampleEvent } from "./event-examples.ts";
import { EVENT_TYPES, type EventType } from "./events.types.ts";

type Json = Record<string, unknown>;

const lowerFirst = (s: string) => s.charAt(0).toLowerCase() + s.slice(1);

const WHEN: Record<EventType, string> = {
  "invoice.created": "A checkout created a pending invoice.",
  "invoice.completed": "The invoice was paid (also a late payment of an expired invoice, and a dispute the merchant won).",
  "invoice.disputed": "The customer disputed the payment.",
  "invoice.expired": "The payment window (INVOICE_PAYMENT_WINDOW_MINUTES) passed without a payment.",
  "invoice.cancelled": "The merchant cancelled a pending invoice.",
  "invoice.refunded": "The merchant refunded a completed or disputed invoice.",
  "delivery.failed": "A payment plugin run errored, timed out or returned something that is not a valid result (a rejected delivery is not an event).",
};

const header = (name: string, description: string, example: string): Json => ({ name, in: "header", required: true, description, schema: { type: "string" }, example });

/** The headers of every delivery (Standard Webhooks), with the example event's values. */
function headers(eventId: string, versions: readonly string[]): Json[] {
  return [
    header("webhook-id", "The event id: the same on every attempt and on a manual resend. Keep the ids you handled and skip a repeat.", eventId),
    header("webhook-timestamp", "When this attempt was signed, in Unix seconds. Refuse one more than 5 minutes off (the Standard Webhooks libraries do).", "1795444200"),
    header(
      "webhook-signature",
      'Space-separated `v1,<base64>` entries: HMAC-SHA256, keyed with the base64-decoded part of the endpoint\'s secret after `whsec_`, of `<webhook-id>.<webhook-timestamp>.<raw body>`. During a secret rotation two entries are sent; either verifying is enough.',
      "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=",
    ),
    { name: "storefront-version", in: "header", required: true, description: "The API version the event is rendered in: the endpoint's remembered version.", schema: { type: "string", enum: [...versions] }, example: versions.at(-1) },
  ];
}

function webhook(type: EventType, versions: readonly string[]): Json {
  const example = exampleEvent(type);
  const schema = type === "delivery.failed" ? "DeliveryFailedEvent" : "InvoiceEvent";
  return {
    post: {
      operationId: `${type.replace(/\.(\w)/, (_, c: string) => c.toUpperCase())}Webhook`,
      summary: `${type}: ${lowerFirst(WHEN[type].replace(/\.$/, "").replace(/ \(.*\)$/, ""))}`,
      description: `${WHEN[type]} Sent to every enabled endpoint that wants this type (an endpoint without types wants all). Verify the signature against the raw body before parsing it; see docs/events.md.`,
      tags: ["events"],
      // Not called with credentials: the receiver authenticates the sender by the signature.
      security: [],
      parameters: headers(example.id, versions),
      requestBody: {
        required: true,
        content: { "application/json": { schema: { $ref: `#/components/schemas/${schema}` }, example } },
      },
      responses: {
        "2XX": { description: "Accepted. Answer within 15 seconds; do the work after answering." },
        "410": { description: "Gone: the endpoint is disabled at once and what was queued for it is dropped." },
        default: { description: "Anything else (another status, a redirect, a timeout, no connection) is retried with the same webhook-id after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h." },
      },
    },
  };
}

/** Adds `webhooks` to an OpenAPI 3.1 document: one entry per event type, named by it. */
export function documentWebhooks(doc: Json, versions: readonly string[]): void {
  doc.webhooks = Object.fromEntries(EVENT_TYPES.map((type) => [type, webhook(type, versions)]));
}
