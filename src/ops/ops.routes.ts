// Operations endpoints: liveness, readiness (the database answers, not shutting down), Prometheus metrics.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import type { Services } from "../services.ts";

export function opsRoutes(services: Services, state: { closing: boolean }): FastifyPluginAsyncTypebox {
  return async (app) => {
    const Status = Type.Object({ status: Type.String({ examples: ["ok"] }) });
    // While the server closes, Fastify itself answers 503 to new requests (return503OnClosing).
    const Closing = Type.Object({}, { additionalProperties: true, description: "Shutting down: the server answers no new requests." });
    app.get(
      "/healthz",
      { schema: { operationId: "healthz", tags: ["operations"], summary: "Liveness: the process answers", response: { 200: Status, 503: Closing } } },
      async () => ({ status: "ok" }),
    );
    app.get(
      "/readyz",
      {
        schema: {
          operationId: "readyz",
          tags: ["operations"],
          summary: "Readiness: the database answers, its schema is at the latest migration, and the server is not shutting down",
          response: { 200: Status, 503: Type.Object({ status: Type.String({ examples: ["database unavailable", "schema not migrated: 1 migration(s) pending", "shutting down"] }) }) },
        },
      },
      async (_request, reply) => {
        if (state.closing) return reply.code(503).send({ status: "shutting down" });
        let pending: string[];
        try {
          pending = await services.db.pendingMigrations();
        } catch {
          return reply.code(503).send({ status: "database unavailable" });
        }
        // A database that lost its schema (or another one behind the same URL) would fail every query.
        if (pending.length > 0) return reply.code(503).send({ status: `schema not migrated: ${pending.length} migration(s) pending` });
        return { status: "ready" };
      },
    );
    app.get(
      "/metrics",
      {
        schema: {
          operationId: "metrics",
          tags: ["operations"],
          summary: "Prometheus metrics (docs/operations.md lists them)",
          response: {
            200: { description: "Prometheus text exposition format.", content: { "text/plain": { schema: { type: "string" } } } },
            503: Closing,
          },
        },
      },
      async (_request, reply) => {
        const body = await services.metrics.registry.metrics();
        return reply.type(services.metrics.registry.contentType).send(body);
      },
    );
  };
}
