// POST /api/paymentPlugins?pluginName=&storeId=: the provider's raw body, byte for byte, any content type.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { errorResponses } from "../lib/schemas.ts";
import type { Services } from "../services.ts";
import { lowerCaseKeys } from "./webhook.service.ts";

/** Seconds a provider is asked to wait when the store's sandbox queue is full (a few runs' worth of wall time). */
const BUSY_RETRY_AFTER_S = 5;

const WebhookQuery = Type.Object(
  {
    pluginName: Type.String({ minLength: 1, maxLength: 64, description: "Name of the store's payment plugin." }),
    storeId: Type.String({ minLength: 1, maxLength: 100 }),
  },
  // Providers and merchants may add their own parameters; the plugin sees them in request.query.
  { additionalProperties: Type.String() },
);

const WebhookResult = Type.Object({
  status: Type.String({ enum: ["pushInvoice", "disputeInvoice", "ignore"] }),
  invoiceId: Type.Optional(Type.String()),
});

export function webhookRoutes(services: Services): FastifyPluginAsyncTypebox {
  const { config } = services;
  return async (app) => {
    // Only here: every content type arrives as the raw bytes the provider signed.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: config.webhookBodyLimitBytes }, (_request, body, done) => done(null, body));

    app.post(
      "/paymentPlugins",
      {
        bodyLimit: config.webhookBodyLimitBytes,
        schema: {
          summary: "Handle a payment provider's webhook with the store's Lua plugin",
          description:
            "The plugin's result decides: pushInvoice completes the invoice, disputeInvoice marks it disputed, ignore does nothing. " +
            "Every delivery is recorded; the response carries x-delivery-id. Providers retry on 5xx. " +
            "503 service_unavailable with Retry-After: the store already has too many plugin runs waiting for the sandbox.",
          tags: ["webhooks"],
          querystring: WebhookQuery,
          response: { 200: WebhookResult, ...errorResponses(400, 401, 404, 409, 413, 429, 500, 503, 504) },
        },
        config: {
          rateLimit: {
            max: config.webhookRateLimit.max,
            timeWindow: config.webhookRateLimit.windowMs,
            hook: "onRequest",
            keyGenerator: (request) => `store:${String((request.query as Record<string, unknown>).storeId ?? "")}`,
          },
        },
      },
      async (request, reply) => {
        const { pluginName, storeId, ...rest } = request.query;
        const query: Record<string, string> = { pluginName, storeId };
        for (const [k, v] of Object.entries(rest)) if (typeof v === "string") query[k] = v;
        const answer = await services.webhooks.handle({
          storeId,
          pluginName,
          method: request.method,
          headers: lowerCaseKeys(request.headers),
          query,
          body: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
          requestId: request.id,
        });
        if (answer.deliveryId !== null) reply.header("x-delivery-id", answer.deliveryId);
        // A 503 from the sandbox means this store's queue is full: come back when it has drained.
        if (answer.status === 503 && !reply.hasHeader("retry-after")) reply.header("retry-after", String(BUSY_RETRY_AFTER_S));
        return reply.code(answer.status as 200).send(answer.body as { status: string });
      },
    );
  };
}
