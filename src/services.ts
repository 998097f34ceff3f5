// Explicit wiring: builds the database, repositories and services once. The server, the command line and
// the tests all start from here (tests on a fresh database).
import type { FastifyRequest } from "fastify";
import type { Config } from "./config.ts";
import { type Db, openDatabase } from "./db/database.ts";
import { createCustomersRepository, type CustomersRepository } from "./customers/customers.repository.ts";
import { createCustomersService, type CustomersService } from "./customers/customers.service.ts";
import { createEndpointSender, type EndpointSender } from "./events/endpoint-target.ts";
import { createEndpointsRepository } from "./events/endpoints.repository.ts";
import { createDispatcher, DELIVERY_TIMEOUT_MS, type Dispatcher, type DispatcherOptions } from "./events/event-dispatcher.ts";
import { createEventsRepository } from "./events/events.repository.ts";
import { createEventsService, type EventsService } from "./events/events.service.ts";
import { createInvoicesRepository, type InvoicesRepository } from "./invoices/invoices.repository.ts";
import { createInvoicesService, type InvoicesService } from "./invoices/invoices.service.ts";
import { type AttemptLimiter, createAttemptLimiter } from "./lib/attempt-limiter.ts";
import { createSignInGuard, type SignInGuard } from "./auth/sign-in-guard.ts";
import { createInvoiceLifecycleService, type InvoiceLifecycleService } from "./invoices/invoice-lifecycle.service.ts";
import { createMetrics, instrumentSandbox, type Metrics } from "./ops/metrics.ts";
import { createDeliveriesRepository, type DeliveriesRepository } from "./plugins/deliveries.repository.ts";
import { createReadsService, type ReadsService } from "./reads/reads.service.ts";
import { createPriorityGate, type PriorityGate } from "./lib/priority-gate.ts";
import { createPluginsService, type PluginsService } from "./plugins/plugins.service.ts";
import { createSecretBox, resolveSecretsKey } from "./plugins/secrets.ts";
import { assertSecretsKeyOpensStoredSecrets } from "./plugins/secrets-key.service.ts";
import { createWebhookService, type WebhookService } from "./plugins/webhook.service.ts";
import { createSandbox, type Sandbox } from "./sandbox/index.ts";
import { createKeyCache } from "./stores/key-cache.ts";
import { type AuthenticatedKey, createStoresService, type StoresService } from "./stores/stores.service.ts";
import { createConsoleService, type ConsoleService } from "./console/console.service.ts";

export interface RouteRateLimit {
  max: number;
  timeWindow: number;
  hook: "preValidation";
  keyGenerator: (request: FastifyRequest) => string;
}

export interface Services {
  config: Readonly<Config>;
  db: Db;
  stores: StoresService;
  customers: CustomersRepository & CustomersService;
  invoices: InvoicesRepository & InvoicesService;
  /** Cancel, refund, and the payment window's expiry. */
  invoiceLifecycle: InvoiceLifecycleService;
  plugins: PluginsService;
  deliveries: DeliveriesRepository;
  webhooks: WebhookService;
  events: EventsService;
  /** Sends queued events to endpoints; `serve` starts it, tests drive it with runDue(). */
  dispatcher: Dispatcher;
  /** Read API pages, built on reader threads (READ_THREADS). */
  reads: ReadsService;
  /** Payment webhooks in flight hold finished read pages back (src/lib/priority-gate.ts). */
  paymentsFirst: PriorityGate;
  sandbox: Sandbox;
  /** The console's logins and sessions. */
  console: ConsoleService;
  metrics: Metrics;
  /** Limits charged to whoever caused them (docs/plugins.md, "What the provider gets"): strangers cannot spend a store's. */
  limits: { authFailures: AttemptLimiter; webhookVerified: AttemptLimiter; webhookUnverified: AttemptLimiter };
  /** Failed API keys, admin tokens and console sign-ins, counted per address and kind before the check. */
  signIn: SignInGuard;
  /** The clock every service uses (tests substitute it). */
  now: () => number;
  /** Per-key rate limit of the read API (rate-limit plugin route config). */
  readRateLimit: RouteRateLimit;
  close(): Promise<void>;
}

export interface ServiceOptions {
  /** Apply migrations before returning (serve, tests). */
  migrate?: boolean;
  now?: () => number;
  /** Start the sandbox's workers now (serve) instead of on the first plugin run (commands, tests). */
  warmSandbox?: boolean;
  /** Refuse to start when SECRETS_KEY cannot open the stored plugin secrets (serve). */
  checkSecretsKey?: boolean;
  /** Event dispatch tuning (tests: a short attempt timeout and schedule). */
  dispatch?: Partial<DispatcherOptions> & { timeoutMs?: number; signingNow?: () => number };
}

/** Defers the worker pool until a plugin first runs or compiles: most commands never need it. */
function lazySandbox(limits: Config["plugin"]): Sandbox {
  let inner: Sandbox | null = null;
  const get = () => (inner ??= createSandbox(limits));
  return {
    run: (input, host) => get().run(input, host),
    check: (source) => get().check(source),
    close: async () => {
      if (inner !== null) await inner.close();
    },
  };
}

export async function createServices(config: Readonly<Config>, options: ServiceOptions = {}): Promise<Services> {
  const db = openDatabase(config.database);
  if (options.migrate ?? true) await db.migrate();
  const now = options.now ?? Date.now;
  const invoicesRepo = createInvoicesRepository(db);
  const metrics = createMetrics({ pgPool: db.pgPool, dialect: db.dialect });
  const sandbox = instrumentSandbox(options.warmSandbox ? createSandbox(config.plugin) : lazySandbox(config.plugin), metrics, config.plugin.poolSize);
  const box = createSecretBox(resolveSecretsKey(config).key);
  if (options.checkSecretsKey) {
    try {
      await assertSecretsKeyOpensStoredSecrets(db.kysely, box);
    } catch (err) {
      await db.close();
      throw err;
    }
  }
  const plugins = createPluginsService(db.kysely, box, sandbox, now);
  const deliveries = createDeliveriesRepository(db.kysely);
  const webhooks = createWebhookService({
    db: db.kysely,
    plugins,
    invoices: invoicesRepo,
    deliveries,
    sandbox,
    retentionDays: config.deliveryRetentionDays,
    unverifiedBodyBytes: config.deliveryUnverifiedBodyBytes,
    storeMaxBodyBytes: config.deliveryStoreMaxBytes,
    now,
  });
  const sender: EndpointSender = createEndpointSender(config.events.endpointAllow, options.dispatch?.timeoutMs ?? DELIVERY_TIMEOUT_MS);
  const events = createEventsService({
    db: db.kysely,
    events: createEventsRepository(db.kysely),
    endpoints: createEndpointsRepository(db.kysely),
    box,
    policy: sender.policy,
    retentionDays: config.events.retentionDays,
    now,
  });
  const { timeoutMs: _timeout, signingNow, ...dispatchOptions } = options.dispatch ?? {};
  const dispatcher = createDispatcher({
    db: db.kysely,
    dialect: db.dialect,
    box,
    sender,
    now,
    ...(signingNow ? { signingNow } : {}),
    onAttempt: (result, createdAt) => {
      const delivered = result.ok && result.status >= 200 && result.status < 300;
      metrics.eventAttempts.inc({ result: delivered ? "delivered" : result.ok ? "rejected" : "failed" });
      if (delivered) metrics.eventDeliveryLag.observe(Math.max(0, now() - createdAt) / 1000);
    },
    // Half the slots at most for one endpoint: a slow one never takes all of them.
    options: { concurrency: config.events.dispatchConcurrency, perEndpoint: Math.max(1, Math.floor(config.events.dispatchConcurrency / 2)), ...dispatchOptions },
  });
  const customersRepo = createCustomersRepository(db);
  const keyCache = createKeyCache<AuthenticatedKey>(db, config.database.kind === "postgres" ? config.database.url : null, now, config.apiKeyCacheSeconds * 1000);
  const stores = createStoresService(db.kysely, now, keyCache);
  const paymentsFirst = createPriorityGate(config.readYieldMaxMs);
  const limits = {
    authFailures: createAttemptLimiter(config.authFailureLimit),
    webhookVerified: createAttemptLimiter(config.webhookRateLimit),
    webhookUnverified: createAttemptLimiter(config.webhookUnverifiedLimit),
  };
  const reads = createReadsService({
    database: config.database,
    threads: config.readThreads,
    nice: config.readThreadsNice,
    repos: { customers: customersRepo, invoices: invoicesRepo },
    gate: paymentsFirst,
  });
  return {
    config,
    db,
    stores,
    customers: { ...customersRepo, ...createCustomersService(db.kysely, now) },
    invoices: { ...invoicesRepo, ...createInvoicesService(db.kysely, invoicesRepo, now) },
    invoiceLifecycle: createInvoiceLifecycleService({ db: db.kysely, dialect: db.dialect, invoices: invoicesRepo, paymentWindowMinutes: config.invoicePaymentWindowMinutes, now }),
    plugins,
    deliveries,
    webhooks,
    events,
    dispatcher,
    reads,
    paymentsFirst,
    sandbox,
    console: createConsoleService({ db: db.kysely, stores, adminToken: config.adminToken, idleMinutes: config.consoleSessionIdleMinutes, now }),
    limits,
    signIn: createSignInGuard(limits.authFailures),
    metrics,
    now,
    readRateLimit: {
      max: config.rateLimit.max,
      timeWindow: config.rateLimit.windowMs,
      hook: "preValidation",
      keyGenerator: (request) => (request.apiKey ? `key:${request.apiKey.keyId}` : `ip:${request.ip}`),
    },
    close: async () => {
      await dispatcher.stop();
      await sender.close();
      await reads.close();
      await sandbox.close();
      await keyCache.close();
      await db.close();
    },
  };
}
