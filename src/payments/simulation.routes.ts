// Admin API for dry runs and replays of the payment path: a plugin run against a given or recorded
// request that changes nothing, and a recorded delivery sent through the plugin's current version again
// (recorded as a new delivery). Mounted inside the admin scope, behind ADMIN_TOKEN.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { AppError } from "../errors.ts";
import { MAX_SOURCE_BYTES, MAX_VERSION } from "../plugins/plugins.service.ts";
import { Nullable, errorResponses } from "../schemas/common.schemas.ts";
import { replayView, simulationView } from "./payment-views.ts";
import type { WebhookService } from "./webhook.service.ts";

const PluginParams = Type.Object({ storeId: Type.String(), name: Type.String() });
const LogLine = Type.Object({ description: Type.String(), type: Type.String(), at: Type.String() });
const FetchRecord = Type.Object(
  { url: Type.String(), method: Type.String(), status: Nullable(Type.Integer()), error: Nullable(Type.String()), durationMs: Type.Number() },
  { additionalProperties: true },
);
const RunError = Nullable(Type.Object({ kind: Type.String(), message: Type.String(), line: Type.Optional(Type.Integer()) }));

const SimulateBody = Type.Object(
  {
    body: Type.Optional(Type.String({ description: "The raw webhook body as text." })),
    bodyBase64: Type.Optional(Type.String({ description: "The raw body as base64, for binary payloads." })),
    headers: Type.Optional(Type.Record(Type.String(), Type.String())),
    query: Type.Optional(Type.Record(Type.String(), Type.String())),
    version: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_VERSION, description: "Default: the current version." })),
    source: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: MAX_SOURCE_BYTES,
        description: "Unsaved Lua source to run instead of the stored version, with the plugin's secrets (the console's test bench). A compile error comes back as the run's `error` with its line.",
      }),
    ),
    receivedAt: Type.Optional(
      Type.String({
        format: "date-time",
        description: "The script's clock (os.time, os.date): e.g. a recorded delivery's receipt time, so timestamped signatures verify. Default: now.",
      }),
    ),
    deliveryId: Type.Optional(
      Type.String({
        minLength: 1,
        description: "Run a recorded delivery's request (body byte for byte, headers, query) on its receipt time, read on the server: any size the webhook took. Excludes body, bodyBase64, headers and query.",
      }),
    ),
    sign: Type.Optional(
      Type.Boolean({ description: "Sign the request as the plugin's catalogue provider would, with this store's own settings (its signing secret), at the run's clock. 400 when the plugin's provider cannot be signed here." }),
    ),
  },
  { additionalProperties: false },
);
const SimulationSchema = Type.Object({
  plugin: Type.Object({
    name: Type.String(),
    version: Type.Integer(),
    enabled: Type.Boolean(),
    unsaved: Type.Boolean({ description: "The run was of the given `source` (based on `version`), not of the stored version." }),
  }),
  result: Type.Unknown(),
  error: RunError,
  logs: Type.Array(LogLine),
  fetches: Type.Array(FetchRecord),
  durationMs: Type.Number(),
  request: Type.Object(
    { headers: Type.Record(Type.String(), Type.String()), receivedAt: Type.String({ format: "date-time" }), signed: Type.Boolean() },
    { description: "The request as run: its headers (with the signature made when `sign` was given) and clock." },
  ),
});

export interface SimulationRoutesDeps {
  webhooks: WebhookService;
}

const security = [{ adminToken: [] }];
const tags = ["plugins"];

export function simulationAdminRoutes(deps: SimulationRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    await app.register(simulateRoutes(deps));
    // GET /stores/:storeId/deliveries (the searchable list) and GET …/deliveries/:deliveryId: deliveries.routes.ts.
    await app.register(replayRoutes(deps));
  };
}

/** A dry run of a plugin against a given or recorded request: nothing changes. */
function simulateRoutes(deps: SimulationRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      "/stores/:storeId/plugins/:name/simulate",
      {
        schema: {
          tags,
          security,
          summary: "Dry run: the plugin against a body and headers; changes nothing",
          params: PluginParams,
          body: SimulateBody,
          response: { 200: SimulationSchema, ...errorResponses(400, 401, 404, 409) },
        },
      },
      async (request) => {
        const { body, bodyBase64, headers, query, version, receivedAt, source, deliveryId, sign } = request.body;
        if (body !== undefined && bodyBase64 !== undefined) throw new AppError("invalid_request", "give body or bodyBase64, not both", { param: "bodyBase64" });
        if (deliveryId !== undefined && (body !== undefined || bodyBase64 !== undefined || headers !== undefined || query !== undefined)) {
          throw new AppError("invalid_request", "deliveryId runs the recorded request: give no body, bodyBase64, headers or query with it", { param: "deliveryId" });
        }
        const raw = bodyBase64 !== undefined ? Buffer.from(bodyBase64, "base64") : Buffer.from(body ?? "", "utf8");
        return simulationView(
          await deps.webhooks.simulate(request.params.storeId, request.params.name, {
            body: raw,
            ...(headers ? { headers } : {}),
            ...(query ? { query } : {}),
            ...(version ? { version } : {}),
            ...(receivedAt ? { receivedAt: Date.parse(receivedAt) } : {}),
            ...(source !== undefined ? { source } : {}),
            ...(deliveryId !== undefined ? { deliveryId } : {}),
            ...(sign ? { sign } : {}),
          }),
        );
      },
    );
  };
}

/** A recorded delivery sent through the plugin's current version again, recorded as a new delivery. */
function replayRoutes(deps: SimulationRoutesDeps): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.post(
      "/stores/:storeId/deliveries/:deliveryId/replay",
      {
        schema: {
          tags,
          security,
          summary: "Replay a delivery through the plugin's current version (recorded as a new delivery)",
          params: Type.Object({ storeId: Type.String(), deliveryId: Type.String() }),
          response: { 200: Type.Object({ deliveryId: Nullable(Type.String()), replayOf: Type.String(), status: Type.Integer(), response: Type.Unknown() }), ...errorResponses(401, 404, 409) },
        },
      },
      async (request) => {
        const answer = await deps.webhooks.replay(request.params.storeId, request.params.deliveryId, request.id);
        return replayView(answer, request.params.deliveryId);
      },
    );
  };
}
