// GET /api/{namespace}/customers: a thin adapter from HTTP to the customers repository.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyReply } from "fastify";
import { authenticatedStoreId, requireApiKey } from "../auth/api-key.hook.ts";
import { parseListQuery } from "../lib/list-query.ts";
import { passBytes } from "../reads/reads.service.ts";
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
      async (request, reply) => {
        const q = parseListQuery(request.query);
        // The page arrives as ready JSON (stored documents joined), built off this thread when reader
        // threads are on; the response schema documents it and is not run again.
        const page = await services.reads.page("customers", authenticatedStoreId(request), q);
        // The bytes may be memory shared with the reader thread: given back once the response is done with
        // them ("close" comes after the last byte is handed to the socket, or when the connection is gone).
        // A client that reset the connection while the page was being built has had its "close" already.
        if (reply.raw.closed) page.release();
        else reply.raw.once("close", page.release);
        // Typed as the schema's object; what goes out is its JSON, already serialized. The serializer passes
        // the bytes through as they are (Fastify sends a Buffer over shared memory as it does any Buffer,
        // but would otherwise take it for an object to serialize).
        return (reply as FastifyReply).type("application/json; charset=utf-8").serializer(passBytes).send(page.body);
      },
    );
  };
}
