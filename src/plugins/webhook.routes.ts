// POST /api/paymentPlugins?pluginName=&storeId=: the provider's raw body, byte for byte, any content type.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import { errorResponses } from "../lib/schemas.ts";
import type { Services } from "../services.ts";
import { lowerCaseKeys } from "./webhook.service.ts";

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
        // Every answer counts, rate-limited and invalid requests included (storefront_webhook_responses_total).
        onResponse: async (_request, reply) => services.metrics.webhookResponses.inc({ status: String(reply.statusCode) }),
        schema: {
          operationId: "handlePaymentWebhook",
          summary: "Handle a payment provider's webhook with the store's Lua plugin",
          description:
            "The plugin's result decides: pushInvoice completes the invoice, disputeInvoice marks it disputed, ignore does nothing. " +
            "Every delivery is recorded; the response carries x-delivery-id. Providers retry on 5xx.",
          tags: ["webhooks"],
          querystring: WebhookQuery,
          response: { 200: WebhookResult, ...errorResponses(400, 401, 404, 409, 413, 429, 500, 504) },
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
        return reply.code(answer.status as 200).send(answer.body as { status: string });
      },
    );
  };
}
