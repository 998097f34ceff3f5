// buildApp(services): the Fastify instance with every route, one error envelope, request ids and metrics.
// It never listens; `storefront serve` and the tests (app.inject) decide how it is reached.
import { randomUUID } from "node:crypto";
import fastifyRateLimit from "@fastify/rate-limit";
import fastifySwagger from "@fastify/swagger";
import fastifySwaggerUi from "@fastify/swagger-ui";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import Fastify, { type FastifyError, type FastifyInstance } from "fastify";
import { adminRoutes } from "./admin/admin.routes.ts";
import { customersRoutes } from "./customers/customers.routes.ts";
import { CustomerSchema } from "./customers/customers.schemas.ts";
import { AppError, type ErrorCode, errorBody } from "./errors.ts";
import { CustomerInvoiceSchema, InvoiceSchema } from "./invoices/invoices.schemas.ts";
import { invoicesRoutes } from "./invoices/invoices.routes.ts";
import { ErrorSchema } from "./lib/schemas.ts";
import { EventSchema } from "./events/events.schemas.ts";
import { eventsRoutes } from "./events/events.routes.ts";
import { opsRoutes } from "./ops/ops.routes.ts";
import { webhookRoutes } from "./plugins/webhook.routes.ts";
import type { Services } from "./services.ts";

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export interface AppOptions {
  /** Pino logger options; false for none (tests). */
  logger?: boolean | { level: string };
}

export async function buildApp(services: Services, options: AppOptions = {}): Promise<FastifyInstance> {
  const { config } = services;
  const app = Fastify({
    logger: options.logger ?? { level: config.logLevel },
    trustProxy: config.trustProxy,
    bodyLimit: 1024 * 1024,
    // A provider's own x-request-id is kept when it is sane, so logs can be joined across systems.
    genReqId: (req) => {
      const incoming = req.headers["x-request-id"];
      return typeof incoming === "string" && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    },
    // Unknown query parameters are an error (CONTRACT §4), not silently dropped.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: true, allErrors: false } },
    return503OnClosing: true,
  }).withTypeProvider<TypeBoxTypeProvider>();

  const state = { closing: false };
  app.addHook("preClose", async () => {
    state.closing = true;
  });
  // Requests still in flight when shutdown starts close their keep-alive connection after answering;
  // otherwise an idle keep-alive socket would hold the server open until its timeout.
  app.addHook("onSend", async (_request, reply) => {
    if (state.closing) reply.header("connection", "close");
  });

  app.addSchema(ErrorSchema);
  app.addSchema(CustomerInvoiceSchema);
  app.addSchema(InvoiceSchema);
  app.addSchema(CustomerSchema);
  app.addSchema(EventSchema);

  app.addHook("onRequest", async (request, reply) => {
    request.apiKey = null;
    reply.header("x-request-id", request.id);
  });
  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    services.metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    services.metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });

  app.setErrorHandler((error: FastifyError | AppError, request, reply) => {
    const { status, code, message, extra } = toErrorResponse(error);
    if (status >= 500) request.log.error({ err: error }, "request failed");
    return reply.code(status).send(errorBody(code, message, request.id, extra));
  });
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(errorBody("not_found", `No route ${request.method} ${request.url.split("?")[0]}`, request.id)),
  );

  await app.register(fastifyRateLimit, {
    global: false,
    errorResponseBuilder: (_request, context) =>
      new AppError("rate_limited", `Rate limit exceeded: ${context.max} requests per ${context.after === "" ? "window" : "window; retry in " + context.after}`),
  });

  await app.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "storefront",
        version: "0.1.0",
        description: "Customer and invoice read API, payment-plugin webhooks and administration of a storefront commerce service.",
      },
      components: {
        securitySchemes: {
          apiKey: { type: "apiKey", in: "header", name: "Authorization", description: "A store's API key, raw or as `Bearer <key>`." },
          adminToken: { type: "http", scheme: "bearer", description: "ADMIN_TOKEN" },
        },
      },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === "string" ? json.$id : `def-${i}`) },
  });
  await app.register(fastifySwaggerUi, { routePrefix: "/docs" });
  app.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());

  await app.register(opsRoutes(services, state));
  await app.register(customersRoutes(services), { prefix: `/api/${config.apiNamespace}` });
  await app.register(invoicesRoutes(services), { prefix: `/api/${config.apiNamespace}` });
  await app.register(eventsRoutes(services), { prefix: `/api/${config.apiNamespace}` });
  await app.register(adminRoutes(services), { prefix: "/api/admin" });
  await app.register(webhookRoutes(services), { prefix: "/api" });

  return app;
}

interface ErrorResponse {
  status: number;
  code: ErrorCode;
  message: string;
  extra: Record<string, unknown>;
}

const FASTIFY_STATUS_CODES: Record<number, ErrorCode> = {
  400: "invalid_request",
  404: "not_found",
  405: "method_not_allowed",
  413: "payload_too_large",
  415: "unsupported_media_type",
  429: "rate_limited",
};

/** Maps anything thrown in a request to the one error envelope. Unknown errors are bugs: 500, no details. */
export function toErrorResponse(error: FastifyError | AppError): ErrorResponse {
  if (error instanceof AppError) {
    const extra: Record<string, unknown> = { ...(error.details ?? {}) };
    if (error.param !== undefined) extra.param = error.param;
    return { status: error.status, code: error.code, message: error.message, extra };
  }
  if (error.validation && error.validation.length > 0) {
    const v = error.validation[0]!;
    const params = v.params as Record<string, unknown>;
    if (typeof params.additionalProperty === "string") {
      const where = error.validationContext === "querystring" ? "parameter" : "property";
      return { status: 400, code: "invalid_request", message: `Unknown ${where} "${params.additionalProperty}"`, extra: { param: params.additionalProperty } };
    }
    const path = (typeof params.missingProperty === "string" ? `${v.instancePath}/${params.missingProperty}` : v.instancePath)
      .replace(/^\//, "")
      .replace(/\/(\d+)(?=\/|$)/g, "[$1]")
      .replace(/\//g, ".");
    const param = path === "" ? (error.validationContext ?? "body") : path;
    return { status: 400, code: "invalid_request", message: `${param} ${v.message ?? "is invalid"}`, extra: { param } };
  }
  const status = typeof error.statusCode === "number" ? error.statusCode : 500;
  const code = FASTIFY_STATUS_CODES[status];
  if (code !== undefined) {
    // Fastify's own 4xx (bad JSON, body too large, unsupported media type) carry safe messages.
    return { status, code, message: error.message, extra: {} };
  }
  return { status: 500, code: "internal_error", message: "Internal error; the request id identifies it in the logs", extra: {} };
}
