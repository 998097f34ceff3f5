// Operations endpoints: liveness, readiness (the database answers, not shutting down; with details an
// operator should see, such as a proxy TRUST_PROXY does not name), Prometheus metrics.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import type { ForwardedNotice } from "../../lib/client-address.ts";
import { AppError } from "../../errors.ts";
import type { Metrics } from "./metrics.ts";
import { metricsAuthorized } from "./metrics-server.ts";

const Details = Type.Object(
  {
    proxy: Type.Object({
      trustProxy: Type.String({ enum: ["none", "hops", "addresses"], description: "What TRUST_PROXY trusts: nothing (the socket's peer is the client), a hop count, or addresses and ranges." }),
      untrustedForwardedFor: Type.Union(
        [
          Type.Object({ requests: Type.Integer(), firstSeenAt: Type.String({ format: "date-time" }), lastSeenAt: Type.String({ format: "date-time" }) }),
          Type.Null(),
        ],
        { description: "Requests since start that carried X-Forwarded-For from a peer TRUST_PROXY does not trust (a proxy it should name); null: none." },
      ),
    }),
  },
  { description: "What an operator should know; never a reason for the status." },
);

/** What the operations routes read: the schema's state, the metrics' settings and registry. */
export interface OpsDeps {
  db: { pendingMigrations(): Promise<string[]> };
  config: { metrics: { port: number | null; token: string | null } };
  metrics: Pick<Metrics, "registry">;
}

/**
 * Probes answer small objects the handlers build themselves: JSON.stringify writes them. Compiling their
 * schemas into serializers (fast-json-stringify, with an Ajv validator for the nullable branch) cost a
 * start-up about 60 ms at the first /readyz, the probe an orchestrator waits on.
 */
const plainJson = () => (data: unknown) => JSON.stringify(data);

export function opsRoutes(services: OpsDeps, state: { closing: boolean; forwarded: ForwardedNotice }): FastifyPluginAsyncTypebox {
  return async (app) => {
    const Status = Type.Object({ status: Type.String({ examples: ["ok"] }) });
    // While the server closes, Fastify itself answers 503 to new requests (return503OnClosing).
    const Closing = Type.Object({}, { additionalProperties: true, description: "Shutting down: the server answers no new requests." });
    app.get(
      "/healthz",
      { serializerCompiler: plainJson, schema: { operationId: "healthz", tags: ["operations"], summary: "Liveness: the process answers", response: { 200: Status, 503: Closing } } },
      async () => ({ status: "ok" }),
    );
    app.get(
      "/readyz",
      {
        serializerCompiler: plainJson,
        schema: {
          operationId: "readyz",
          tags: ["operations"],
          summary: "Readiness: the database answers, its schema is at the latest migration, and the server is not shutting down",
          response: {
            200: Type.Object({ status: Type.String({ examples: ["ready"] }), details: Details }),
            503: Type.Object({ status: Type.String({ examples: ["database unavailable", "schema not migrated: 1 migration(s) pending", "shutting down"] }), details: Details }),
          },
        },
      },
      async (_request, reply) => {
        const details = { proxy: state.forwarded.view() };
        if (state.closing) return reply.code(503).send({ status: "shutting down", details });
        let pending: string[];
        try {
          pending = await services.db.pendingMigrations();
        } catch {
          return reply.code(503).send({ status: "database unavailable", details });
        }
        // A database that lost its schema (or another one behind the same URL) would fail every query.
        if (pending.length > 0) return reply.code(503).send({ status: `schema not migrated: ${pending.length} migration(s) pending`, details });
        return { status: "ready", details };
      },
    );
    // With METRICS_PORT the metrics are served there only (src/platform/ops/metrics-server.ts), not on the API's port.
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
