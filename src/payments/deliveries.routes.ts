// Admin API: the delivery log searched by outcome, plugin, invoice and time, newest first, one delivery
// read whole, and how a plugin's recent deliveries ended (mounted inside the admin scope, behind
// ADMIN_TOKEN). A thin adapter over the deliveries repository.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { AppError } from "../errors.ts";
import { decodeCursor, encodeCursor } from "../lib/list-query.ts";
import { Nullable, PaginationSchema, errorResponses } from "../schemas/common.schemas.ts";
import type { StoresService } from "../stores/stores.service.ts";
import { DELIVERY_OUTCOMES, type DeliveriesRepository } from "./deliveries.repository.ts";
import { parseDeliveryFilters } from "./deliveries.filters.ts";

const TIME_BOUND = "ISO 8601 date-time or date, or a duration back from now: `30m`, `1h`, `7d`.";

export const DeliverySummarySchema = Type.Object({
  id: Type.String({ examples: ["dlv_3k9d2m7q1x8v5c4b6n0z"] }),
  pluginName: Type.String({ examples: ["stripe"] }),
  pluginVersion: Nullable(Type.Integer()),
  replayOf: Nullable(Type.String()),
  outcome: Type.String({ enum: [...DELIVERY_OUTCOMES] }),
  invoiceId: Nullable(Type.String()),
  transition: Nullable(Type.String({ examples: ["pending->completed"] })),
  responseStatus: Type.Integer({ examples: [200] }),
  durationMs: Type.Number({ examples: [3.127] }),
  eventId: Nullable(Type.String({ description: "The provider's event id: the plugin's eventId, else the JSON body's `id` (or `event.id`).", examples: ["evt_1QbCatalogCheckout0001"] })),
  eventType: Nullable(Type.String({ description: "The provider's event type: the JSON body's `type`, else `event_type`, else `event.type`.", examples: ["checkout.session.completed"] })),
  warnings: Type.Integer({ description: "The plugin's log lines of type warning or error (an underpayment, an unknown invoice): worth a look even when the outcome is ignored." }),
  createdAt: Type.String({ format: "date-time" }),
});

/** A total is counted up to this many deliveries; past it the page says "more than". */
export const TOTAL_CAP = 10_000;

const DeliveryViewSchema = Type.Object({
  ...DeliverySummarySchema.properties,
  request: Type.Object({
    method: Type.String({ examples: ["POST"] }),
    headers: Type.Record(Type.String(), Type.String()),
    query: Type.Record(Type.String(), Type.String()),
    body: Type.String({ description: "The raw body as text; empty when it is not UTF-8 (see bodyBase64)." }),
    bodyBase64: Nullable(Type.String({ description: "The raw body as base64 when it is not UTF-8." })),
  }),
  result: Type.Unknown({ description: "What the plugin returned, or null." }),
  error: Type.Unknown({ description: "The run's error ({kind, message, line?}), or null." }),
  logs: Type.Array(Type.Object({ description: Type.String(), type: Type.String(), at: Type.String() })),
  fetches: Type.Array(
    Type.Object(
      { url: Type.String(), method: Type.String(), status: Nullable(Type.Integer()), error: Nullable(Type.String()), durationMs: Type.Number() },
      { additionalProperties: true },
    ),
  ),
  response: Type.Unknown({ description: "The body the webhook answered." }),
});

export const DeliveryListQuerySchema = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
    cursor: Type.Optional(Type.String({ description: "Opaque: nextCursor of the previous page (repeat the same filters)." })),
    pluginName: Type.Optional(Type.String({ description: "Only this plugin's deliveries.", examples: ["stripe"] })),
    outcome: Type.Optional(Type.String({ description: `One outcome or several, comma-separated: ${DELIVERY_OUTCOMES.join(", ")}.`, examples: ["plugin_error,plugin_timeout"] })),
    invoiceId: Type.Optional(Type.String({ description: "Only deliveries about this invoice." })),
    eventId: Type.Optional(Type.String({ description: "Only deliveries of this provider event id.", examples: ["evt_1QbCatalogCheckout0001"] })),
    eventType: Type.Optional(Type.String({ description: "Only deliveries of this provider event type.", examples: ["charge.dispute.created"] })),
    total: Type.Optional(Type.Boolean({ description: `Also count the deliveries that match (pagination.total, at most ${TOTAL_CAP}; pagination.totalCapped says when there are more).` })),
    since: Type.Optional(Type.String({ description: `Arrived at or after. ${TIME_BOUND}`, examples: ["1h", "2024-06-01T00:00:00Z"] })),
    until: Type.Optional(Type.String({ description: `Arrived at or before. ${TIME_BOUND}`, examples: ["2024-06-30"] })),
  },
  { additionalProperties: false },
);

/** What the delivery log's routes need: the store check, the log, and the clock (relative time bounds). */
export interface DeliveriesRoutesDeps {
  stores: StoresService;
  deliveries: DeliveriesRepository;
  now: () => number;
}

export function deliveriesRoutes(deps: DeliveriesRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    // In this order: the OpenAPI document lists paths as they were registered.
    await app.register(deliveryLogRoutes(deps));
    await app.register(pluginOutcomesRoutes(deps));
  };
}

/** The log: search it, read one delivery. */
function deliveryLogRoutes(deps: DeliveriesRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/stores/:storeId/deliveries",
      {
        schema: {
          tags: ["plugins"],
          security: [{ adminToken: [] }],
          summary: "Search the delivery log, newest first",
          description: "Every filter given must hold. Each is served by an index, whatever the size of the log.",
          params: Type.Object({ storeId: Type.String() }),
          querystring: DeliveryListQuerySchema,
          response: {
            200: Type.Object({
              data: Type.Array(DeliverySummarySchema),
              pagination: Type.Object({
                ...PaginationSchema.properties,
                total: Type.Optional(Type.Integer({ description: "With total=true: how many deliveries match the filters (all pages)." })),
                totalCapped: Type.Optional(Type.Boolean({ description: `With total=true: more than ${TOTAL_CAP} match; total says ${TOTAL_CAP}.` })),
              }),
            }),
            ...errorResponses(400, 401, 404),
          },
        },
      },
      async (request) => {
        const { limit = 50, cursor, total: withTotal, ...filterInput } = request.query;
        const filters = parseDeliveryFilters(filterInput, deps.now());
        await deps.stores.requireStore(request.params.storeId);
        const after = cursor === undefined ? null : decodeCursor(cursor);
        if (cursor !== undefined && after === null) throw new AppError("invalid_request", "cursor is not a cursor this API issued", { param: "cursor" });
        const { deliveries, next } = await deps.deliveries.list(request.params.storeId, { ...filters, limit, after });
        const pagination = { limit, nextCursor: next === null ? null : encodeCursor(next) };
        if (!withTotal) return { data: deliveries, pagination };
        const total = await deps.deliveries.count(request.params.storeId, filters, TOTAL_CAP + 1);
        return { data: deliveries, pagination: { ...pagination, total: Math.min(total, TOTAL_CAP), totalCapped: total > TOTAL_CAP } };
      },
    );

    app.get(
      "/stores/:storeId/deliveries/:deliveryId",
      {
        schema: {
          tags: ["plugins"],
          security: [{ adminToken: [] }],
          summary: "One delivery: request, result, logs, fetches, response",
          params: Type.Object({ storeId: Type.String(), deliveryId: Type.String() }),
          response: { 200: DeliveryViewSchema, ...errorResponses(401, 404) },
        },
      },
      async (request) => {
        const d = await deps.deliveries.get(request.params.storeId, request.params.deliveryId);
        if (!d) throw new AppError("delivery_not_found", `No delivery ${request.params.deliveryId} in store ${request.params.storeId}`, { param: "deliveryId" });
        return d;
      },
    );
  };
}

/** A count per outcome over a plugin's last deliveries. */
function pluginOutcomesRoutes(deps: Pick<DeliveriesRoutesDeps, "stores" | "deliveries">): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/stores/:storeId/plugins/:name/outcomes",
      {
        schema: {
          tags: ["plugins"],
          security: [{ adminToken: [] }],
          summary: "How a plugin's recent deliveries ended",
          description: "A count per outcome over the plugin's last `last` deliveries (replays included), and when the newest arrived. Deliveries stay after a plugin is removed, so a removed plugin still answers.",
          params: Type.Object({ storeId: Type.String(), name: Type.String() }),
          querystring: Type.Object({ last: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000, default: 50 })) }, { additionalProperties: false }),
          response: {
            200: Type.Object({
              name: Type.String(),
              total: Type.Integer({ description: "Deliveries counted (at most `last`)." }),
              outcomes: Type.Record(Type.String(), Type.Integer(), { description: "Outcome → count; outcomes that did not occur are absent.", examples: [{ ok: 47, plugin_error: 3 }] }),
              lastAt: Nullable(Type.String({ format: "date-time" })),
            }),
            ...errorResponses(400, 401, 404),
          },
        },
      },
      async (request) => {
        await deps.stores.requireStore(request.params.storeId);
        const r = await deps.deliveries.recentOutcomes(request.params.storeId, request.params.name, request.query.last ?? 50);
        return { name: request.params.name, total: r.total, outcomes: r.outcomes, lastAt: r.lastAt === null ? null : new Date(r.lastAt).toISOString() };
      },
    );
  };
}
