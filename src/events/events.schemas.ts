// Schemas of the event feed and of the endpoint administration (docs/events.md).
import { Type } from "typebox";
import { DateTime, Nullable, errorResponses } from "../schemas/common.schemas.ts";
import { EVENT_TYPES, INVOICE_EVENT_TYPES } from "./events.types.ts";

export const EventSchema = Type.Object(
  {
    id: Type.String({ description: "evt_…; also the webhook-id of every delivery of this event." }),
    type: Type.String({ description: `One of ${EVENT_TYPES.join(", ")}; clients ignore types they do not know.` }),
    createdAt: DateTime,
    data: Type.Object({}, { additionalProperties: true, description: "`{ invoice: Invoice }` for invoice.*, `{ delivery: {…} }` for delivery.failed." }),
  },
  { $id: "Event" },
);

/** An invoice.* event as webhooks and the feed carry it: the invoice as the list operation shows it then. */
export const InvoiceEventSchema = Type.Object(
  {
    id: Type.String({ description: "evt_…; also the webhook-id header, the same on every attempt and on a manual resend." }),
    type: Type.String({ enum: [...INVOICE_EVENT_TYPES], description: "One per status the invoice enters; invoice.created at checkout." }),
    createdAt: DateTime,
    data: Type.Object({ invoice: Type.Ref("Invoice") }, { description: "The invoice at the moment of the change, with the change's log line." }),
  },
  { $id: "InvoiceEvent" },
);

/** delivery.failed: a payment plugin run errored, timed out or returned something that is not a valid result. */
export const DeliveryFailedEventSchema = Type.Object(
  {
    id: Type.String({ description: "evt_…; also the webhook-id header." }),
    type: Type.Literal("delivery.failed"),
    createdAt: DateTime,
    data: Type.Object({
      delivery: Type.Object({
        id: Type.String({ description: "The delivery in the delivery log (storefront deliveries show <id>)." }),
        pluginName: Type.String(),
        outcome: Type.String({ enum: ["plugin_error", "plugin_timeout"] }),
        status: Type.Integer({ description: "The HTTP status the payment provider was answered (500 or 504): it retries." }),
        error: Nullable(
          Type.Object({
            kind: Type.String({ description: "script_error, invalid_result, timeout, memory_limit, killed, …" }),
            message: Type.String(),
            line: Type.Optional(Type.Integer({ description: "The script's line, when known." })),
          }),
        ),
      }),
    }),
  },
  { $id: "DeliveryFailedEvent" },
);

export const FeedQuerySchema = Type.Object(
  {
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: "nextCursor of the previous page; omit to start from the oldest retained event." })),
    types: Type.Optional(Type.String({ maxLength: 500, description: "Comma-separated event types to return." })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
  },
  { additionalProperties: false },
);

export const FeedSchema = {
  summary: "A store's events, oldest first",
  description:
    "Resumable: pass `pagination.nextCursor` back as `cursor`. It is returned on every page, also an empty one, so a client " +
    "polls with it; an event that commits after a reader has passed its position is never skipped. Events are kept EVENT_RETENTION_DAYS.",
  tags: ["read"],
  security: [{ apiKey: [] }],
  querystring: FeedQuerySchema,
  response: {
    200: Type.Object({
      data: Type.Object({ events: Type.Array(Type.Ref("Event")) }),
      pagination: Type.Object({ limit: Type.Integer(), nextCursor: Type.String() }),
    }),
    ...errorResponses(400, 401, 403, 429),
  },
};

export const EventTypeSchema = Type.String({ enum: [...EVENT_TYPES] });

/** What an endpoint answered to an example event (POST …/endpoints/{endpointId}/test). */
export const ExampleSentSchema = Type.Object({
  endpointId: Type.String(),
  eventId: Type.String({ description: "The example's id (a fresh evt_… each time), sent as webhook-id." }),
  type: EventTypeSchema,
  ok: Type.Boolean({ description: "The endpoint answered 2xx." }),
  responseStatus: Nullable(Type.Integer()),
  error: Nullable(Type.String({ description: "Why no answer came (timeout, connection refused, an address ENDPOINT_ALLOW does not list)." })),
  responseHeaders: Type.Record(Type.String(), Type.String(), { description: "The answer's headers." }),
  responseExcerpt: Type.String({ description: "The first KiB of the answer's body." }),
  durationMs: Type.Number(),
});

export const EndpointSchema = Type.Object({
  id: Type.String(),
  url: Type.String(),
  description: Type.String(),
  types: Type.Array(Type.String(), { description: "Event types sent; empty means all." }),
  enabled: Type.Boolean(),
  disabledReason: Nullable(Type.String()),
  apiVersion: Type.String(),
  createdAt: DateTime,
  updatedAt: DateTime,
});

export const CreatedEndpointSchema = Type.Object({
  ...EndpointSchema.properties,
  secret: Type.String({ description: "whsec_…: the signing secret, shown only here." }),
});

export const EndpointBodySchema = Type.Object(
  {
    url: Type.String({ minLength: 1, maxLength: 2048 }),
    types: Type.Optional(Type.Array(EventTypeSchema, { maxItems: 20 })),
    enabled: Type.Optional(Type.Boolean()),
    description: Type.Optional(Type.String({ maxLength: 500 })),
    version: Type.Optional(Type.String({ description: "The API version its events are rendered in (storefront-version); default: the current one, remembered.", examples: ["2026-11-23"] })),
  },
  { additionalProperties: false },
);

export const EndpointPatchSchema = Type.Object(
  {
    url: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    types: Type.Optional(Type.Array(EventTypeSchema, { maxItems: 20 })),
    enabled: Type.Optional(Type.Boolean()),
    description: Type.Optional(Type.String({ maxLength: 500 })),
    version: Type.Optional(Type.String({ description: "The API version its events are rendered in (storefront-version); default: the current one, remembered.", examples: ["2026-11-23"] })),
  },
  { additionalProperties: false },
);

export const AttemptSchema = Type.Object({
  id: Type.String(),
  eventId: Type.String(),
  endpointId: Type.String(),
  deliveryId: Type.String(),
  attempt: Type.Integer({ description: "1 for the first try of a delivery, 2 for its first retry, …" }),
  outcome: Type.String({ enum: ["succeeded", "failed", "exhausted", "gone"], description: "failed: will be retried; exhausted: the last retry failed; gone: 410, endpoint disabled." }),
  responseStatus: Nullable(Type.Integer()),
  error: Nullable(Type.String({ description: "Why no answer came (timeout, connection refused, address refused)." })),
  responseExcerpt: Type.String({ description: "The first KiB of the answer's body." }),
  responseHeaders: Type.Record(Type.String(), Type.String(), { description: "The answer's headers (empty when no answer came, and for attempts made before they were kept)." }),
  durationMs: Type.Number(),
  createdAt: DateTime,
  nextAttemptAt: Nullable(Type.String({ format: "date-time", description: "When the delivery is tried again: on its latest attempt while it is still pending, else null." })),
});

export const EventListQuerySchema = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: "Opaque: nextCursor of the previous page (repeat the same filters)." })),
    types: Type.Optional(Type.String({ maxLength: 500, description: "Comma-separated event types to return.", examples: ["invoice.completed,invoice.refunded"] })),
    invoiceId: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: "Only the events about this invoice." })),
  },
  { additionalProperties: false },
);

export const AttemptsQuerySchema = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
    eventId: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  },
  { additionalProperties: false },
);
