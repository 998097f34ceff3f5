// buildApp(services): the Fastify instance with every route, one error envelope, request ids and metrics.
// It never listens; `storefront serve` and the tests (app.inject) decide how it is reached.
import { randomUUID } from "node:crypto";
import fastifyRateLimit from "@fastify/rate-limit";
import fastifySwagger from "@fastify/swagger";
import fastifySwaggerUi from "@fastify/swagger-ui";
import type { TypeBoxTypeProvider } from "@fastify/type-provider-typebox";
import { Type } from "typebox";
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { adminRoutes } from "./admin/admin.routes.ts";
import { consoleRoutes, isConsolePath, setConsoleSecurityHeaders } from "./console/console.routes.ts";
import { customersRoutes } from "./customers/customers.routes.ts";
import { CustomerSchema } from "./schemas/customers.schemas.ts";
import { AppError, type ErrorCode, errorBody } from "./errors.ts";
import type { Config } from "./config.ts";
import { CustomerInvoiceSchema, InvoiceSchema } from "./schemas/invoices.schemas.ts";
import { invoicesRoutes } from "./invoices/invoices.routes.ts";
import { isDatabaseUnavailable } from "./platform/db/db-errors.ts";
import { lazySchemaCompilers } from "./lib/lazy-schema-compilers.ts";
import { assertStorable } from "./lib/input-guard.ts";
import { requirePlainIntegers } from "./lib/strict-numbers.ts";
import { createForwardedNotice, type ForwardedNotice, trustFunction } from "./lib/client-address.ts";
import { ErrorSchema } from "./schemas/common.schemas.ts";
import { completeOpenApi } from "./platform/ops/openapi.ts";
import { OPENAPI_EXAMPLES, REQUEST_EXAMPLES } from "./platform/ops/openapi.examples.ts";
import { DeliveryFailedEventSchema, EventSchema, InvoiceEventSchema } from "./events/events.schemas.ts";
import { documentWebhooks } from "./events/events.openapi.ts";
import { eventsRoutes } from "./events/events.routes.ts";
import { serveMetricsOnOwnPort } from "./platform/ops/metrics-server.ts";
import { opsRoutes } from "./platform/ops/ops.routes.ts";
import { RequestLogController } from "./platform/ops/request-log.ts";
import { webhookRoutes } from "./payments/webhook.routes.ts";
import type { Services } from "./services.ts";
import { currentVersion, knownVersions } from "./versioning/registry.ts";
import { VERSION_HEADER, installVersioning } from "./versioning/versioning.hook.ts";
import { documentVersioning } from "./versioning/versioning.openapi.ts";

/** The /docs page's logo: the service's name instead of the framework's. */
const STOREFRONT_LOGO = {
  type: "image/svg+xml",
  content: Buffer.from('<svg xmlns="http://www.w3.org/2000/svg" width="200" height="40"><text x="0" y="28" font-family="sans-serif" font-size="26" font-weight="bold" fill="#fff">storefront</text></svg>'),
};

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
/** Routes behind an API key or the admin token; the webhook's 401s are rejected deliveries, limited on their own. */
const guardsApiSignIn = (url: string) => url.startsWith("/api/") && !url.startsWith("/api/paymentPlugins");
/** Asked of clients while the database cannot be reached (providers retry on 503). */
const RETRY_AFTER_SECONDS = 5;

export interface AppOptions {
  /** Pino logger options; false for none (tests). */
  logger?: boolean | { level: string };
  /** The logger to use (serve's, src/platform/ops/logger.ts); wins over `logger`. */
  loggerInstance?: FastifyBaseLogger;
}

/** What the hooks and the probes share: whether shutdown has started, and the untrusted-proxy notice. */
interface AppState {
  closing: boolean;
  forwarded: ForwardedNotice;
}

type App = ReturnType<typeof createServer>;

export async function buildApp(services: Services, options: AppOptions = {}): Promise<FastifyInstance> {
  const { config } = services;
  const app = createServer(config, options);
  const state: AppState = { closing: false, forwarded: createForwardedNotice(config.trustProxy) };
  // In this order: hooks run in the order they are added.
  installShutdownAndSecurityHeaders(app, state);
  documentCommonStatuses(app, config);
  addSharedSchemas(app);
  installRequestHooks(app, services, state);
  installErrorHandlers(app);
  await registerRateLimit(app);
  await registerOpenApi(app, config);
  await registerRoutes(app, services, state);
  return app;
}

/** The server itself: logging, request ids, parsing, the router's own errors, and the limits on slow clients. */
function createServer(config: Readonly<Config>, options: AppOptions) {
  const app = Fastify({
    ...(options.loggerInstance ? { loggerInstance: options.loggerInstance } : { logger: options.logger ?? { level: config.logLevel } }),
    // One line per request, when it is answered; the probes' at debug.
    logController: new RequestLogController(),
    trustProxy: trustFunction(config.trustProxy),
    bodyLimit: 1024 * 1024,
    genReqId: requestIdOf,
    // Unknown query parameters are an error (README, "The read API"), not silently dropped.
    ajv: { customOptions: { removeAdditional: false, coerceTypes: true, allErrors: false } },
    // Each route's schemas are compiled on its first request, not all at start-up (time to ready, memory).
    schemaController: { compilersFactory: lazySchemaCompilers() },
    return503OnClosing: true,
    frameworkErrors: (error, request, reply) => answerFrameworkError(error, request as FastifyRequest, reply as FastifyReply),
    // Slow clients (slowloris, stalled bodies, silent connections) are closed; see config.http.
    requestTimeout: config.http.requestTimeoutMs,
    connectionTimeout: config.http.idleTimeoutMs,
    keepAliveTimeout: config.http.idleTimeoutMs,
    http: {
      headersTimeout: config.http.headersTimeoutMs,
      requestTimeout: config.http.requestTimeoutMs,
      // Node looks at the header and request timeouts only this often (30 s by default).
      connectionsCheckingInterval: Math.min(1_000, config.http.headersTimeoutMs),
    },
  }).withTypeProvider<TypeBoxTypeProvider>();
  app.server.maxConnections = config.http.maxConnections;
  return app;
}

/** A provider's own x-request-id is kept when it is sane, so logs can be joined across systems. */
function requestIdOf(req: { headers: Record<string, string | string[] | undefined> }): string {
  const incoming = req.headers["x-request-id"];
  return typeof incoming === "string" && REQUEST_ID.test(incoming) ? incoming : randomUUID();
}

/**
 * A URL the router cannot decode is answered before any hook runs: still the envelope, the request id
 * and the version header.
 */
function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  const tooLong = error.code === "FST_ERR_MAX_PARAM_LENGTH";
  const { status, code, message } = tooLong
    ? { status: 414, code: "uri_too_long" as const, message: "A path parameter is longer than 100 characters" }
    : toErrorResponse(error);
  if (status >= 500) request.log.error({ err: error }, "request failed");
  if (isConsolePath(request.url)) setConsoleSecurityHeaders(reply);
  void reply
    .code(status)
    .header("x-request-id", request.id)
    .header(VERSION_HEADER, currentVersion().version)
    .send(errorBody(code, message, request.id));
}

function installShutdownAndSecurityHeaders(app: App, state: AppState): void {
  app.addHook("preClose", async () => {
    state.closing = true;
  });
  // Requests still in flight when shutdown starts close their keep-alive connection after answering;
  // otherwise an idle keep-alive socket would hold the server open until its timeout.
  app.addHook("onSend", async (request, reply) => {
    if (state.closing) reply.header("connection", "close");
    if (isConsolePath(request.url)) setConsoleSecurityHeaders(reply);
  });
}

/**
 * Statuses any route can answer, whatever it declares: 500 (a bug), 503 (database unreachable), 429 and
 * 414 where they apply. Declared here once so that /openapi.json lists every status a route answers.
 */
function documentCommonStatuses(app: App, config: Readonly<Config>): void {
  // Failed sign-ins are limited per address: API keys and the admin token, and METRICS_TOKEN when it is set.
  const guardsSignIn = (url: string) => guardsApiSignIn(url) || (config.metrics.token !== null && url.split("?")[0] === "/metrics");
  app.addHook("onRoute", (route) => {
    const schema = route.schema as { response?: Record<string, unknown>; hide?: boolean } | undefined;
    if (!schema?.response || schema.hide) return;
    const statuses = [500, 503];
    if (route.url.includes(":")) statuses.push(414);
    if (guardsSignIn(route.url) || route.url.startsWith("/api/paymentPlugins")) statuses.push(429);
    // Called from the console: a write without its CSRF token, or a login outside its stores' routes.
    if (route.url.startsWith("/api/admin")) statuses.push(403);
    for (const status of statuses) schema.response[status] ??= Type.Ref("Error");
  });
}

/** Schemas routes refer to by $ref, listed once under components.schemas. */
function addSharedSchemas(app: App): void {
  for (const schema of [ErrorSchema, CustomerInvoiceSchema, InvoiceSchema, CustomerSchema, EventSchema, InvoiceEventSchema, DeliveryFailedEventSchema]) app.addSchema(schema);
}

/** Every request: its id, the untrusted-proxy warning, the input guards, the API version, and its metrics. */
function installRequestHooks(app: App, services: Services, state: AppState): void {
  const { config } = services;
  app.addHook("onRequest", async (request, reply) => {
    request.apiKey = null;
    reply.header("x-request-id", request.id);
    // A proxy in front that TRUST_PROXY does not name: every client looks like it (src/lib/client-address.ts).
    if (state.forwarded.note(request.socket.remoteAddress, request.headers["x-forwarded-for"], Date.now())) {
      request.log.warn(
        { peer: request.socket.remoteAddress, trustProxy: config.trustProxy.kind },
        "requests carry X-Forwarded-For from a peer TRUST_PROXY does not trust: client addresses are that peer's (set TRUST_PROXY to the proxies in front, docs/operations.md); said once, counted in /readyz",
      );
    }
  });
  app.addHook("preValidation", requirePlainIntegers);
  app.addHook("preHandler", async (request) => {
    assertStorable({ query: request.query, params: request.params, body: request.body });
  });
  // After the request id (its 400 carries one), before any route (its onRoute hook documents that 400).
  installVersioning(app, { apiNamespace: config.apiNamespace });
  app.addHook("onResponse", async (request, reply) => {
    const route = request.routeOptions.url ?? "unmatched";
    services.metrics.httpRequests.inc({ method: request.method, route, status: String(reply.statusCode) });
    services.metrics.httpDuration.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });
}

/** Whatever a route throws, and a path no route has, is answered in the one error envelope. */
function installErrorHandlers(app: App): void {
  app.setErrorHandler((error: FastifyError | AppError, request, reply) => {
    const { status, code, message, extra } = toErrorResponse(error);
    if (status >= 500 && status !== 503) request.log.error({ err: error }, "request failed");
    if (status === 503) {
      request.log.warn({ err: error }, "unavailable");
      reply.header("retry-after", String(RETRY_AFTER_SECONDS));
    }
    return reply.code(status).send(errorBody(code, message, request.id, extra));
  });
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(errorBody("not_found", `No route ${request.method} ${request.url.split("?")[0]}`, request.id)),
  );
}

/** Off by default: the routes that are limited say so, each with its own limit. */
async function registerRateLimit(app: App): Promise<void> {
  await app.register(fastifyRateLimit, {
    global: false,
    errorResponseBuilder: (_request, context) =>
      new AppError("rate_limited", `Rate limit exceeded: ${context.max} requests per ${context.after === "" ? "window" : "window; retry in " + context.after}`),
  });
}

/** /openapi.json and the /docs page. */
async function registerOpenApi(app: App, config: Readonly<Config>): Promise<void> {
  await app.register(fastifySwagger, {
    openapi: {
      openapi: "3.1.0",
      info: {
        title: "storefront",
        version: currentVersion().version,
        description: "Customer and invoice read API, payment-plugin webhooks and administration of a storefront commerce service.",
        license: { name: "MIT", identifier: "MIT" },
      },
      components: { securitySchemes: SECURITY_SCHEMES },
    },
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === "string" ? json.$id : `def-${i}`) },
    // operationIds, public routes' security, response descriptions, servers, examples: src/platform/ops/openapi.ts.
    // What src/platform/ops/openapi.ts completes (in place), then the versions and their header on every response.
    transformObject: (doc) => {
      const openapi = "openapiObject" in doc ? doc.openapiObject : doc.swaggerObject;
      completeOpenApi(openapi, {
        prefixes: ["/api/admin", `/api/${config.apiNamespace}`, "/api"],
        examples: OPENAPI_EXAMPLES,
        requestExamples: REQUEST_EXAMPLES,
      });
      // The outbound events: what storefront sends to the merchants' endpoints.
      documentWebhooks(openapi as Record<string, unknown>, knownVersions().map((v) => v.version));
      return documentVersioning(doc);
    },
  });
  await app.register(fastifySwaggerUi, { routePrefix: "/docs", theme: { title: "storefront API" }, logo: STOREFRONT_LOGO });
  app.get("/openapi.json", { schema: { hide: true } }, async () => app.swagger());
}

/** How a caller signs in: a store's API key, the admin token, or the console's session. */
const SECURITY_SCHEMES = {
  apiKey: { type: "apiKey", in: "header", name: "Authorization", description: "A store's API key, raw or as `Bearer <key>`." },
  adminToken: { type: "http", scheme: "bearer", description: "ADMIN_TOKEN" },
  consoleSession: {
    type: "apiKey",
    in: "cookie",
    name: "storefront_session",
    description: "The console's session (POST /console/api/session). Writes also need x-csrf-token; a console login reaches only its own stores.",
  },
} as const;

async function registerRoutes(app: App, services: Services, state: AppState): Promise<void> {
  const { config } = services;
  await app.register(opsRoutes(services, state));
  serveMetricsOnOwnPort(app, config, services.metrics);
  await app.register(customersRoutes(services), { prefix: `/api/${config.apiNamespace}` });
  await app.register(invoicesRoutes(services), { prefix: `/api/${config.apiNamespace}` });
  await app.register(eventsRoutes(services), { prefix: `/api/${config.apiNamespace}` });
  await app.register(adminRoutes(services), { prefix: "/api/admin" });
  await app.register(webhookRoutes(services), { prefix: "/api" });
  await app.register(consoleRoutes(services), { prefix: "/console" });
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
  if (isDatabaseUnavailable(error)) {
    return { status: 503, code: "database_unavailable", message: "The database cannot be reached; retry shortly", extra: {} };
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
    // A property name outside its pattern (propertyNames): say which name.
    const name = (v as { propertyName?: unknown }).propertyName;
    const what = typeof name === "string" ? `${param} has a name "${name.slice(0, 64)}" that` : param;
    return { status: 400, code: "invalid_request", message: `${what} ${v.message ?? "is invalid"}`, extra: { param } };
  }
  const status = typeof error.statusCode === "number" ? error.statusCode : 500;
  const code = FASTIFY_STATUS_CODES[status];
  if (code !== undefined) {
    // Fastify's own 4xx (bad JSON, body too large, unsupported media type) carry safe messages.
    return { status, code, message: error.message, extra: {} };
  }
  return { status: 500, code: "internal_error", message: "Internal error; the request id identifies it in the logs", extra: {} };
}
