// GET /api/{namespace}/customers: a thin adapter from HTTP to the read model: the API key and the list
// query checked here, the page built by the reader threads (readmodel/readers.service.ts).
import type { RateLimitOptions } from "@fastify/rate-limit";
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply } from "fastify";
import { authenticatedStoreId, requireApiKey } from "../auth/api-key.hook.ts";
import type { SignInGuard } from "../auth/sign-in-guard.ts";
import { parseListQuery } from "../lib/list-query.ts";
import { INVOICE_STATUSES } from "../schemas/invoice-statuses.ts";
import { type ReadsService, sendPage } from "../readmodel/readers.service.ts";
import type { StoresService } from "../stores/stores.service.ts";
import { ListCustomersSchema } from "../schemas/customers.schemas.ts";

/** What the customers list needs: the API key check, the read API's rate limit, and the reader threads. */
export interface CustomersRoutesDeps {
  stores: StoresService;
  signIn: SignInGuard;
  readRateLimit: RateLimitOptions;
  reads: ReadsService;
}

export function customersRoutes(deps: CustomersRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.get(
      "/customers",
      {
        schema: ListCustomersSchema,
        onRequest: requireApiKey(deps.stores, "customers:read", deps.signIn),
        config: { rateLimit: deps.readRateLimit },
      },
      async (request, reply) => {
        const q = parseListQuery(request.query, INVOICE_STATUSES);
        // The page arrives as ready JSON (stored documents joined), built off this thread when reader
        // threads are on; the response schema documents it and is not run again.
        const page = await deps.reads.page("customers", authenticatedStoreId(request), q);
        // Typed as the schema's object; what goes out is its JSON, already serialized.
        return sendPage(reply as FastifyReply, page);
      },
    );
  };
}
