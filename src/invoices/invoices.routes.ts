// GET /api/{namespace}/invoices: a thin adapter from HTTP to the invoices repository.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { authenticatedStoreId, requireApiKey } from "../auth/api-key.hook.ts";
import { encodeCursor, parseListQuery } from "../lib/list-query.ts";
import type { Services } from "../services.ts";
import { ListInvoicesSchema } from "./invoices.schemas.ts";

export function invoicesRoutes(services: Services): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/invoices",
      {
        schema: ListInvoicesSchema,
        onRequest: requireApiKey(services.stores, "invoices:read"),
        config: { rateLimit: services.readRateLimit },
      },
      async (request) => {
        const q = parseListQuery(request.query);
        const { invoices, next } = await services.invoices.list(authenticatedStoreId(request), q);
        return { data: { invoices }, pagination: { limit: q.limit, nextCursor: next === null ? null : encodeCursor(next) } };
      },
    );
  };
}
