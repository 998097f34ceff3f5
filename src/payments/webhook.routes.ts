// POST /api/paymentPlugins?pluginName=&storeId=: the provider's raw body, byte for byte, any content type.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyBaseLogger } from "fastify";
import { Type } from "typebox";
import { errorResponses } from "../lib/schemas.ts";
import type { Services } from "../services.ts";
import { AppError } from "../errors.ts";
import { clientBucket } from "../lib/attempt-limiter.ts";
import { createBurstWatch, type BurstWatch } from "../lib/burst-watch.ts";
import { isUnverified, lowerCaseKeys, type WebhookAnswer } from "./webhook.service.ts";

declare module "fastify" {
  interface FastifyRequest {
    /** The headers as the provider sent them, before any normalisation. */
    webhookHeaders?: Record<string, string>;
  }
}

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

/** Rejected deliveries (bad signatures) per store and plugin in a minute before the log says so, once. */
export const REJECTIONS_LOGGED_AT = 10;

export function webhookRoutes(services: Services): FastifyPluginAsyncTypebox {
  const { config, limits } = services;
  // One rejection is a stranger or a typo; many in a minute is a misconfigured secret or an attack.
  const rejections = createBurstWatch({ threshold: REJECTIONS_LOGGED_AT, windowMs: 60_000 });
  return async (app) => {
    // Only here: every content type arrives as the raw bytes the provider signed.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: config.webhookBodyLimitBytes }, (_request, body, done) => done(null, body));
    // "Content-Type:" sent empty matches no parser, not even "*": the plugin still sees the header as
    // sent (captured first), and the body is read as bytes like any other.
    app.addHook("onRequest", async (request, reply) => {
      // Payments first: while this delivery is handled, finished read pages wait (src/lib/priority-gate.ts).
      // "close" comes once the answer is sent or the connection is gone, whichever way the request ends.
      reply.raw.once("close", services.paymentsFirst.enter());
      request.webhookHeaders = lowerCaseKeys(request.headers);
      if (request.headers["content-type"] !== undefined && request.headers["content-type"].trim() === "") request.headers["content-type"] = "application/octet-stream";
    });

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
            "Every delivery is recorded; the response carries x-delivery-id. Providers retry on 5xx. " +
            "503 service_unavailable with Retry-After: the store already has too many plugin runs waiting for the sandbox.",
          tags: ["webhooks"],
          querystring: WebhookQuery,
          response: { 200: WebhookResult, ...errorResponses(400, 401, 404, 409, 413, 429, 500, 503, 504) },
        },
      },
      async (request, reply) => {
        const { pluginName, storeId, ...rest } = request.query;
        // Two budgets, each charged to whoever spent it: a store's verified deliveries, and per store and
        // address the deliveries nobody verified. A stranger's forgeries never 429 the provider's own.
        const unverifiedKey = `${storeId}|${clientBucket(request.ip)}`;
        const wait = limits.webhookUnverified.wait(unverifiedKey) || limits.webhookVerified.wait(storeId);
        if (wait > 0) {
          reply.header("retry-after", String(wait));
          throw new AppError("rate_limited", `Too many deliveries for store ${storeId}; retry in ${wait} s`);
        }
        const query: Record<string, string> = { pluginName, storeId };
        for (const [k, v] of Object.entries(rest)) if (typeof v === "string") query[k] = v;
        const answer = await services.webhooks.handle({
          storeId,
          pluginName,
          method: request.method,
          headers: request.webhookHeaders ?? lowerCaseKeys(request.headers),
          query,
          body: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
          requestId: request.id,
        });
        // A 503 (queue full, secrets or database unavailable) ran nothing to verify: charged to nobody.
        if (isUnverified(answer)) limits.webhookUnverified.hit(unverifiedKey);
        else if (answer.status !== 503) limits.webhookVerified.hit(storeId);
        logAnswer(request.log, { storeId, pluginName, answer, rejections });
        if (answer.deliveryId !== null) reply.header("x-delivery-id", answer.deliveryId);
        if (answer.retryAfter !== undefined) reply.header("retry-after", String(answer.retryAfter));
        return reply.code(answer.status as 200).send(answer.body as { status: string });
      },
    );
  };
}

/**
 * Failures the operator must hear of, at warn: a plugin that crashed or timed out (the provider will retry),
 * and rejected deliveries past REJECTIONS_LOGGED_AT a minute. Ids only, never the body, the headers or the
 * error's text (a script's message may quote the body): `storefront deliveries show <id>` has the rest.
 */
function logAnswer(log: FastifyBaseLogger, a: { storeId: string; pluginName: string; answer: WebhookAnswer; rejections: BurstWatch }): void {
  const { storeId, pluginName, answer } = a;
  const code = (answer.body as { error?: { code?: string } } | null)?.error?.code;
  const ids = { storeId, plugin: pluginName, deliveryId: answer.deliveryId };
  if (code === "plugin_error" || code === "plugin_timeout") {
    log.warn({ ...ids, code, status: answer.status }, `payment plugin ${pluginName} failed (${code}); storefront deliveries show ${answer.deliveryId ?? "?"} --store ${storeId}`);
  } else if (answer.status === 401) {
    const count = a.rejections.note(`${storeId}|${pluginName}`);
    if (count !== null) log.warn({ ...ids, rejected: count, code }, `${count} deliveries to plugin ${pluginName} rejected within a minute (a wrong signing secret, or someone forging them)`);
  }
}
