// GET /api/{namespace}/events: the store's event feed, for the store's own backend (scope events:read).
import type { RateLimitOptions } from "@fastify/rate-limit";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { authenticatedStoreId, requireApiKey } from "../auth/api-key.hook.ts";
import type { SignInGuard } from "../auth/sign-in-guard.ts";
import type { StoresService } from "../stores/stores.service.ts";
import { FeedSchema } from "./events.schemas.ts";
import type { EventsService } from "./events.service.ts";

/** What the feed needs: the API key check, the read API's rate limit, and the events service. */
export interface EventsRoutesDeps {
  stores: StoresService;
  signIn: SignInGuard;
  readRateLimit: RateLimitOptions;
  events: EventsService;
}

export function eventsRoutes(deps: EventsRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/events",
      { schema: FeedSchema, onRequest: requireApiKey(deps.stores, "events:read", deps.signIn), config: { rateLimit: deps.readRateLimit } },
      async (request) => {
        const limit = request.query.limit ?? 100;
        const { events, nextCursor } = await deps.events.feed(authenticatedStoreId(request), {
          limit,
          ...(request.query.cursor !== undefined ? { cursor: request.query.cursor } : {}),
          ...(request.query.types !== undefined ? { types: request.query.types } : {}),
        });
        return { data: { events }, pagination: { limit, nextCursor } };
      },
    );
  };
}
