// Operations endpoints: liveness, readiness (the database answers, not shutting down), Prometheus metrics.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { AppError } from "../errors.ts";
import type { Services } from "../services.ts";
import { metricsAuthorized } from "./metrics-server.ts";

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
    // With METRICS_PORT the metrics are served there only (src/ops/metrics-server.ts), not on the API's port.
    if (services.config.metrics.port !== null) return;
    const token = services.config.metrics.token;
    app.get(
      "/metrics",
      {
        schema: {
          operationId: "metrics",
          tags: ["operations"],
          summary: "Prometheus metrics (docs/operations.md lists them)",
          description: "Open unless METRICS_TOKEN is set: then `Authorization: Bearer <METRICS_TOKEN>`. With METRICS_PORT set, served on that port instead.",
          response: {
            200: { description: "Prometheus text exposition format.", content: { "text/plain": { schema: { type: "string" } } } },
            401: Type.Ref("Error", { description: "METRICS_TOKEN is set and the request does not carry it." }),
            503: Closing,
          },
        },
      },
      async (request, reply) => {
        if (!metricsAuthorized(request.headers.authorization, token)) {
          reply.header("www-authenticate", "Bearer");
          throw new AppError("unauthorized", "GET /metrics needs Authorization: Bearer <METRICS_TOKEN>");
        }
        const body = await services.metrics.registry.metrics();
        return reply.type(services.metrics.registry.contentType).send(body);
      },
    );
  };
}
