// GET /api/{namespace}/customers: a thin adapter from HTTP to the customers repository.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply } from "fastify";
import { authenticatedStoreId, requireApiKey } from "../auth/api-key.hook.ts";
import { parseListQuery } from "../lib/list-query.ts";
import { INVOICE_STATUSES } from "../schemas/invoice-statuses.ts";
import { sendPage } from "../readmodel/readers.service.ts";
import type { Services } from "../services.ts";
import { ListCustomersSchema } from "../schemas/customers.schemas.ts";

export function customersRoutes(services: Services): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/customers",
      {
        schema: ListCustomersSchema,
        onRequest: requireApiKey(services.stores, "customers:read", services.signIn),
        config: { rateLimit: services.readRateLimit },
      },
      async (request, reply) => {
        const q = parseListQuery(request.query, INVOICE_STATUSES);
        // The page arrives as ready JSON (stored documents joined), built off this thread when reader
        // threads are on; the response schema documents it and is not run again.
        const page = await services.reads.page("customers", authenticatedStoreId(request), q);
        // Typed as the schema's object; what goes out is its JSON, already serialized.
        return sendPage(reply as FastifyReply, page);
      },
    );
  };
}
