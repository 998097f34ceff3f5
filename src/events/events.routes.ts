// GET /api/{namespace}/events: the store's event feed, for the store's own backend (scope events:read).
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { authenticatedStoreId, requireApiKey } from "../auth/api-key.hook.ts";
import type { Services } from "../services.ts";
import { FeedSchema } from "./events.schemas.ts";

export function eventsRoutes(services: Services): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/events",
      { schema: FeedSchema, onRequest: requireApiKey(services.stores, "events:read", services.signIn), config: { rateLimit: services.readRateLimit } },
      async (request) => {
        const limit = request.query.limit ?? 100;
        const { events, nextCursor } = await services.events.feed(authenticatedStoreId(request), {
          limit,
          ...(request.query.cursor !== undefined ? { cursor: request.query.cursor } : {}),
          ...(request.query.types !== undefined ? { types: request.query.types } : {}),
        });
        return { data: { events }, pagination: { limit, nextCursor } };
      },
    );
  };
}
