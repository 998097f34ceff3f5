// POST /api/paymentPlugins?pluginName=&storeId=: the provider's raw body, byte for byte, any content type.
import type { FastifyPluginAsyncTypebox } from "@fastify/type-provider-typebox";
import type { FastifyBaseLogger } from "fastify";
import { Type } from "typebox";
import { errorResponses } from "../schemas/common.schemas.ts";
import type { Config } from "../config.ts";
import type { Metrics } from "../platform/ops/metrics.ts";
import { createBurstWatch, type BurstWatch } from "../lib/burst-watch.ts";
import { type AdmissionDeps, admitDelivery } from "./webhook.admission.ts";
import { lowerCaseKeys, type WebhookAnswer, type WebhookService } from "./webhook.service.ts";

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

/** What the webhook needs: its body limit, its response counter, admission (webhook.admission.ts) and the webhook service. */
export interface WebhookRoutesDeps extends AdmissionDeps {
  config: Pick<Config, "webhookBodyLimitBytes">;
  metrics: Pick<Metrics, "webhookResponses">;
  webhooks: WebhookService;
}

export function webhookRoutes(deps: WebhookRoutesDeps): FastifyPluginAsyncTypebox {
  const { config } = deps;
  // One rejection is a stranger or a typo; many in a minute is a misconfigured secret or an attack.
  const rejections = createBurstWatch({ threshold: REJECTIONS_LOGGED_AT, windowMs: 60_000 });
  return async (app) => {
    // Only here: every content type arrives as the raw bytes the provider signed.
    app.removeAllContentTypeParsers();
    app.addContentTypeParser("*", { parseAs: "buffer", bodyLimit: config.webhookBodyLimitBytes }, (_request, body, done) => done(null, body));
    // "Content-Type:" sent empty matches no parser, not even "*": the plugin still sees the header as
    // sent (captured first), and the body is read as bytes like any other.
    app.addHook("onRequest", async (request) => {
      request.webhookHeaders = lowerCaseKeys(request.headers);
      if (request.headers["content-type"] !== undefined && request.headers["content-type"].trim() === "") request.headers["content-type"] = "application/octet-stream";
    });

    app.post(
      "/paymentPlugins",
      {
        bodyLimit: config.webhookBodyLimitBytes,
        // Every answer counts, rate-limited and invalid requests included (storefront_webhook_responses_total).
        onResponse: async (_request, reply) => deps.metrics.webhookResponses.inc({ status: String(reply.statusCode) }),
        schema: {
          operationId: "handlePaymentWebhook",
          summary: "Handle a payment provider's webhook with the store's Lua plugin",
          description:
            "The plugin's result decides: pushInvoice completes the invoice, disputeInvoice marks it disputed, ignore does nothing. " +
            "Every delivery is recorded; the response carries x-delivery-id. Providers retry on 5xx. " +
            "503 service_unavailable with Retry-After: the store already has too many plugin runs waiting for the sandbox. " +
            "403 source_not_allowed: the plugin lists its provider's source ranges and the client's address is not in them (nothing runs, nothing is recorded). " +
            "429 rate_limited with Retry-After: the store's deliveries, or this address's unverified ones, are over their limit.",
          tags: ["webhooks"],
          querystring: WebhookQuery,
          response: { 200: WebhookResult, ...errorResponses(400, 401, 403, 404, 409, 413, 429, 500, 503, 504) },
        },
      },
      async (request, reply) => {
        const { pluginName, storeId, ...rest } = request.query;
        // Source ranges, budgets, payments first: src/payments/webhook.admission.ts. The body has arrived.
        const settle = await admitDelivery(deps, request, reply, storeId, pluginName);
        const query: Record<string, string> = { pluginName, storeId };
        for (const [k, v] of Object.entries(rest)) if (typeof v === "string") query[k] = v;
        const handled = await deps.webhooks.handle({
          storeId,
          pluginName,
          method: request.method,
          headers: request.webhookHeaders ?? lowerCaseKeys(request.headers),
          query,
          body: Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0),
          requestId: request.id,
        });
        const answer = settle(handled, request.id);
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
