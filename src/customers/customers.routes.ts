// GET /api/{namespace}/customers: a thin adapter from HTTP to the customers repository.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { authenticatedStoreId, requireApiKey } from "../auth/api-key.hook.ts";
import { encodeCursor, parseListQuery } from "../lib/list-query.ts";
import type { Services } from "../services.ts";
import { ListCustomersSchema } from "./customers.schemas.ts";

export function customersRoutes(services: Services): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/customers",
      {
        schema: ListCustomersSchema,
        onRequest: requireApiKey(services.stores, "customers:read"),
        config: { rateLimit: services.readRateLimit },
      },
      async (request) => {
        const q = parseListQuery(request.query);
        const { customers, next } = await services.customers.list(authenticatedStoreId(request), q);
        return { data: { customers }, pagination: { limit: q.limit, nextCursor: next === null ? null : encodeCursor(next) } };
      },
    );
  };
}
