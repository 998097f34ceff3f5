// Admin API for outbound webhooks (mounted inside the admin scope, behind ADMIN_TOKEN): endpoints, their
// secret rotation and attempts, the store's events (newest first), one event's read and manual resend.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { Nullable, errorResponses } from "../schemas/common.schemas.ts";
import {
  AttemptSchema,
  AttemptsQuerySchema,
  CreatedEndpointSchema,
  EndpointBodySchema,
  EndpointPatchSchema,
  EndpointSchema,
  EventListQuerySchema,
  EventTypeSchema,
  ExampleSentSchema,
} from "./events.schemas.ts";
import type { EventsService } from "./events.service.ts";

const StoreParams = Type.Object({ storeId: Type.String() });
const EndpointParams = Type.Object({ storeId: Type.String(), endpointId: Type.String() });
const EventParams = Type.Object({ storeId: Type.String(), eventId: Type.String() });

export interface EndpointsRoutesDeps {
  events: EventsService;
}

export function endpointsAdminRoutes(deps: EndpointsRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    const security = [{ adminToken: [] }];
    const tags = ["events"];

    app.post(
      "/stores/:storeId/endpoints",
      {
        schema: {
          tags,
          security,
          summary: "Add a webhook endpoint (its signing secret is shown only in this response)",
          description: "http(s) URLs to public addresses only (ENDPOINT_ALLOW lists exceptions). `types` omitted or empty: every event type.",
          params: StoreParams,
          body: EndpointBodySchema,
          response: { 201: CreatedEndpointSchema, ...errorResponses(400, 401, 404) },
        },
      },
      async (request, reply) => reply.code(201).send(await deps.events.createEndpoint(request.params.storeId, request.body)),
    );

    app.get(
      "/stores/:storeId/endpoints",
      { schema: { tags, security, summary: "List a store's webhook endpoints", params: StoreParams, response: { 200: Type.Object({ data: Type.Array(EndpointSchema) }), ...errorResponses(401, 404) } } },
      async (request) => ({ data: await deps.events.listEndpoints(request.params.storeId) }),
    );

    app.get(
      "/stores/:storeId/endpoints/:endpointId",
      { schema: { tags, security, summary: "Read a webhook endpoint", params: EndpointParams, response: { 200: EndpointSchema, ...errorResponses(401, 404) } } },
      async (request) => deps.events.getEndpoint(request.params.storeId, request.params.endpointId),
    );

    app.patch(
      "/stores/:storeId/endpoints/:endpointId",
      {
        schema: {
          tags,
          security,
          summary: "Change a webhook endpoint (enable it again after it was disabled)",
          params: EndpointParams,
          body: EndpointPatchSchema,
          response: { 200: EndpointSchema, ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => deps.events.updateEndpoint(request.params.storeId, request.params.endpointId, request.body),
    );

    app.delete(
      "/stores/:storeId/endpoints/:endpointId",
      { schema: { tags, security, summary: "Remove a webhook endpoint", params: EndpointParams, response: { 204: Type.Null(), ...errorResponses(401, 404) } } },
      async (request, reply) => {
        await deps.events.removeEndpoint(request.params.storeId, request.params.endpointId);
        return reply.code(204).send(null);
      },
    );

    app.post(
      "/stores/:storeId/endpoints/:endpointId/rotate-secret",
      {
        schema: {
          tags,
          security,
          summary: "Rotate the signing secret (the old one keeps signing for 24 hours)",
          params: EndpointParams,
          response: { 200: Type.Object({ id: Type.String(), secret: Type.String(), previousSecretExpiresAt: Type.String() }), ...errorResponses(401, 404) },
        },
      },
      async (request) => deps.events.rotateSecret(request.params.storeId, request.params.endpointId),
    );

    app.post(
      "/stores/:storeId/endpoints/:endpointId/test",
      {
        // A POST with no body at all sends the default type.
        preValidation: async (request) => {
          request.body ??= {};
        },
        schema: {
          operationId: "testEndpoint",
          tags,
          security,
          summary: "Send an example event to the endpoint now, signed like real ones, and see its answer",
          description:
            "The example of the chosen type (the webhooks section shows them) with a fresh id and the current time, rendered in the endpoint's API version and signed with its secret, " +
            "sent once by this process (under ENDPOINT_ALLOW) whether the endpoint is enabled or not. It is not an event of the store: not in the feed, not retried, not recorded as an attempt. " +
            "200 whatever the endpoint answered: `ok` says whether it took it.",
          params: EndpointParams,
          body: Type.Object({ type: Type.Optional(EventTypeSchema) }, { additionalProperties: false, description: "Optional: the event type (default invoice.completed)." }),
          response: { 200: ExampleSentSchema, ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => deps.events.sendExample(request.params.storeId, request.params.endpointId, request.body.type ?? "invoice.completed"),
    );

    app.get(
      "/stores/:storeId/endpoints/:endpointId/secret",
      {
        schema: {
          tags,
          security,
          summary: "Reveal the endpoint's signing secret",
          description: "For a merchant who lost it (as Svix's App Portal reveals it): the current secret, and during a rotation's 24 hours the previous one, which still signs.",
          params: EndpointParams,
          response: {
            200: Type.Object({ id: Type.String(), secret: Type.String(), previousSecret: Nullable(Type.String()), previousSecretExpiresAt: Nullable(Type.String({ format: "date-time" })) }),
            ...errorResponses(401, 404),
          },
        },
      },
      async (request) => deps.events.revealSecret(request.params.storeId, request.params.endpointId),
    );

    app.post(
      "/stores/:storeId/endpoints/:endpointId/recover",
      {
        schema: {
          tags,
          security,
          summary: "Send again every event whose delivery to the endpoint failed since a time",
          description: `Events whose delivery to this endpoint failed (or was cancelled when it was disabled) at or after \`since\`, and that have not been delivered to it since, are queued again (the same webhook-id). At most ${500} a request: \`more\` says to call again.`,
          params: EndpointParams,
          body: Type.Object({ since: Type.String({ format: "date-time", examples: ["2026-11-20T00:00:00Z"] }) }, { additionalProperties: false }),
          response: { 202: Type.Object({ recovered: Type.Integer(), more: Type.Boolean() }), ...errorResponses(400, 401, 404, 409) },
        },
      },
      async (request, reply) => reply.code(202).send(await deps.events.recover(request.params.storeId, request.params.endpointId, Date.parse(request.body.since))),
    );

    app.get(
      "/stores/:storeId/endpoints/:endpointId/attempts",
      {
        schema: {
          tags,
          security,
          summary: "Attempts made to a webhook endpoint, newest first",
          params: EndpointParams,
          querystring: AttemptsQuerySchema,
          response: { 200: Type.Object({ data: Type.Array(AttemptSchema), pagination: Type.Object({ limit: Type.Integer(), nextCursor: Nullable(Type.String()) }) }), ...errorResponses(400, 401, 404) },
        },
      },
      async (request) => {
        const limit = request.query.limit ?? 100;
        const { attempts, nextCursor } = await deps.events.attempts(request.params.storeId, request.params.endpointId, {
          limit,
          ...(request.query.cursor !== undefined ? { cursor: request.query.cursor } : {}),
          ...(request.query.eventId !== undefined ? { eventId: request.query.eventId } : {}),
        });
        return { data: attempts, pagination: { limit, nextCursor } };
      },
    );

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
