// Admin API for a store's events, newest first, for people (the console, support): list them by type and
// invoice, read one, send one again (mounted inside the admin scope, behind ADMIN_TOKEN). Programs follow
// the feed instead (events.routes.ts); endpoints and their attempts: endpoints.routes.ts.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { Nullable, errorResponses } from "../schemas/common.schemas.ts";
import { EventListQuerySchema } from "./events.schemas.ts";
import type { EventsService } from "./events.service.ts";

const StoreParams = Type.Object({ storeId: Type.String() });
const EventParams = Type.Object({ storeId: Type.String(), eventId: Type.String() });

export interface EventsAdminRoutesDeps {
  events: EventsService;
}

const security = [{ adminToken: [] }];
const tags = ["events"];

export function eventsAdminRoutes(deps: EventsAdminRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/stores/:storeId/events",
      {
        schema: {
          operationId: "listStoreEvents",
          tags,
          security,
          summary: "A store's events, newest first",
          description: "For people (the console, support): filter by type and invoice, page back with `cursor`. Programs follow the feed (GET /api/{namespace}/events) instead.",
          params: StoreParams,
          querystring: EventListQuerySchema,
          response: { 200: Type.Object({ data: Type.Array(Type.Ref("Event")), pagination: Type.Object({ limit: Type.Integer(), nextCursor: Nullable(Type.String()) }) }), ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => {
        const limit = request.query.limit ?? 50;
        const { events, nextCursor } = await deps.events.listEvents(request.params.storeId, {
          limit,
          ...(request.query.cursor !== undefined ? { cursor: request.query.cursor } : {}),
          ...(request.query.types !== undefined ? { types: request.query.types } : {}),
          ...(request.query.invoiceId !== undefined ? { invoiceId: request.query.invoiceId } : {}),
        });
        return { data: events, pagination: { limit, nextCursor } };
      },
    );

    app.get(
      "/stores/:storeId/events/:eventId",
      { schema: { tags, security, summary: "Read one event", params: EventParams, response: { 200: Type.Ref("Event"), ...errorResponses(401, 404) } } },
      async (request) => deps.events.getEvent(request.params.storeId, request.params.eventId),
    );

    app.post(
      "/stores/:storeId/events/:eventId/resend",
      {
        // A POST with no body at all means "to every subscribed endpoint".
        preValidation: async (request) => {
          request.body ??= {};
        },
        schema: {
          tags,
          security,
          summary: "Send an event again (to one endpoint, or to every enabled endpoint that wants its type)",
          description: "The same webhook-id as before: receivers that deduplicate by it ignore what they already have.",
          params: EventParams,
          body: Type.Object({ endpointId: Type.Optional(Type.String({ minLength: 1 })) }, { additionalProperties: false, description: "Optional: an empty request is a resend to every subscribed endpoint." }),
          response: {
            202: Type.Object({ eventId: Type.String(), deliveries: Type.Array(Type.Object({ id: Type.String(), endpointId: Type.String() })) }),
            ...errorResponses(400, 401, 404, 409),
          },
        },
      },
      async (request, reply) => reply.code(202).send(await deps.events.resend(request.params.storeId, request.params.eventId, request.body.endpointId)),
    );
  };
}
