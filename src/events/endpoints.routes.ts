// Admin API for outbound webhooks (mounted inside the admin scope, behind ADMIN_TOKEN): endpoints, their
// signing secret (rotation, reveal, a signed test), and their attempts and recovery. The store's events
// themselves (list, read, resend): events-admin.routes.ts.
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
  EventTypeSchema,
  ExampleSentSchema,
} from "./events.schemas.ts";
import type { EventsService } from "./events.service.ts";

const StoreParams = Type.Object({ storeId: Type.String() });
const EndpointParams = Type.Object({ storeId: Type.String(), endpointId: Type.String() });

export interface EndpointsRoutesDeps {
  events: EventsService;
}

const security = [{ adminToken: [] }];
const tags = ["events"];

export function endpointsAdminRoutes(deps: EndpointsRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    // In this order: the OpenAPI document lists paths as they were registered.
    await app.register(endpointRoutes(deps));
    await app.register(endpointSigningRoutes(deps));
    await app.register(endpointAttemptRoutes(deps));
  };
}

/** The endpoints themselves: add, list, read, change, remove. */
function endpointRoutes(deps: EndpointsRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
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
  };
}

/** An endpoint's signing secret: rotate it, send a signed example now, reveal it. */
function endpointSigningRoutes(deps: EndpointsRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
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
  };
}

/** What was sent to an endpoint: its attempts, and queueing again what failed since a time. */
function endpointAttemptRoutes(deps: EndpointsRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
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
  };
}
