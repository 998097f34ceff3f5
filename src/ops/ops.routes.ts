// Operations endpoints: liveness, readiness (the database answers, not shutting down), Prometheus metrics.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import type { Services } from "../services.ts";

export function opsRoutes(services: Services, state: { closing: boolean }): FastifyPluginAsyncTypebox {
  return async (app) => {
    const Status = Type.Object({ status: Type.String() });
    app.get("/healthz", { schema: { tags: ["operations"], summary: "Liveness", response: { 200: Status } } }, async () => ({ status: "ok" }));
    app.get(
      "/readyz",
      { schema: { tags: ["operations"], summary: "Readiness: the database answers and its schema is at the latest migration", response: { 200: Status, 503: Status } } },
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
    app.get("/metrics", { schema: { tags: ["operations"], summary: "Prometheus metrics", hide: false } }, async (_request, reply) => {
      const body = await services.metrics.registry.metrics();
      return reply.type(services.metrics.registry.contentType).send(body);
    });
  };
}
