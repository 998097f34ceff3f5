// Admin API: the delivery log searched by outcome, plugin, invoice and time, newest first (mounted inside
// the admin scope, behind ADMIN_TOKEN). A thin adapter over the deliveries repository.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { AppError } from "../errors.ts";
import { decodeCursor, encodeCursor } from "../lib/list-query.ts";
import { Nullable, PaginationSchema, errorResponses } from "../lib/schemas.ts";
import type { Services } from "../services.ts";
import { DELIVERY_OUTCOMES } from "./deliveries.repository.ts";
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
  createdAt: Type.String({ format: "date-time" }),
});

export const DeliveryListQuerySchema = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 50 })),
    cursor: Type.Optional(Type.String({ description: "Opaque: nextCursor of the previous page (repeat the same filters)." })),
    pluginName: Type.Optional(Type.String({ description: "Only this plugin's deliveries.", examples: ["stripe"] })),
    outcome: Type.Optional(Type.String({ description: `One outcome or several, comma-separated: ${DELIVERY_OUTCOMES.join(", ")}.`, examples: ["plugin_error,plugin_timeout"] })),
    invoiceId: Type.Optional(Type.String({ description: "Only deliveries about this invoice." })),
    since: Type.Optional(Type.String({ description: `Arrived at or after. ${TIME_BOUND}`, examples: ["1h", "2024-06-01T00:00:00Z"] })),
    until: Type.Optional(Type.String({ description: `Arrived at or before. ${TIME_BOUND}`, examples: ["2024-06-30"] })),
  },
  { additionalProperties: false },
);

export function deliveriesRoutes(services: Services): FastifyPluginAsyncTypebox {
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
          response: { 200: Type.Object({ data: Type.Array(DeliverySummarySchema), pagination: PaginationSchema }), ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => {
        const { limit = 50, cursor, ...filterInput } = request.query;
        const filters = parseDeliveryFilters(filterInput, services.now());
        await services.stores.requireStore(request.params.storeId);
        const after = cursor === undefined ? null : decodeCursor(cursor);
        if (cursor !== undefined && after === null) throw new AppError("invalid_request", "cursor is not a cursor this API issued", { param: "cursor" });
        const { deliveries, next } = await services.deliveries.list(request.params.storeId, { ...filters, limit, after });
        return { data: deliveries, pagination: { limit, nextCursor: next === null ? null : encodeCursor(next) } };
      },
    );
  };
}
