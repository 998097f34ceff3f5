// Explicit wiring: builds the database, repositories and services once. The server, the command line and
// the tests all start from here (tests on a fresh database).
import type { FastifyRequest } from "fastify";
import type { Config } from "./config.ts";
import { type Db, openDatabase } from "./platform/db/database.ts";
import type { AppliedMigration, MigrationObserver } from "./platform/db/migrate.ts";
import { createCustomersRepository, type CustomersRepository } from "./readmodel/customer-documents.ts";
import { createCustomersService, type CustomersService } from "./customers/customers.service.ts";
import { createEndpointSender, type EndpointSender, type SendResult } from "./events/endpoint-target.ts";
import { createEndpointsRepository } from "./events/endpoints.repository.ts";
import { type AttemptReport, createDispatcher, DELIVERY_TIMEOUT_MS, type Dispatcher, type DispatcherOptions } from "./events/event-dispatcher.ts";
import { createEventsRepository } from "./events/events.repository.ts";
import { createEventsService, type EventsService } from "./events/events.service.ts";
import { createInvoicesRepository, type InvoicesRepository } from "./readmodel/invoice-documents.ts";
import { createInvoicesService, type InvoicesService } from "./invoices/invoices.service.ts";
import { type AttemptLimiter, createAttemptLimiter } from "./lib/attempt-limiter.ts";
import { createSignInGuard, type SignInGuard } from "./auth/sign-in-guard.ts";
import { createInvoiceLifecycleService, type InvoiceLifecycleService } from "./invoices/invoice-lifecycle.service.ts";
import { buildInfo } from "./platform/ops/build.ts";
import { createMetrics, type Metrics, observeOutboundBacklog, observeReadModel } from "./platform/ops/metrics.ts";
import { instrumentSandbox } from "./sandbox/sandbox.metrics.ts";
import { createDeliveriesRepository, type DeliveriesRepository } from "./payments/deliveries.repository.ts";
import { createReadsService, type ReadsService } from "./readmodel/readers.service.ts";
import { createPriorityGate, eventLoopBusy, type PriorityGate } from "./readmodel/priority-gate.ts";
import { createPluginsService, type PluginsService, type RunnablePlugin } from "./plugins/plugins.service.ts";
import { createSecretBox, resolveSecretsKey } from "./platform/crypto/secret-box.ts";
import { assertSecretsKeyOpensStoredSecrets } from "./platform/crypto/secrets-key.service.ts";
import { createWebhookService, type WebhookService } from "./payments/webhook.service.ts";
import { postgresPaymentStatements } from "./payments/payment.postgres.ts";
import { createSandbox, type Sandbox } from "./sandbox/index.ts";
import { createKeyCache, KEY_CHANGES_CHANNEL, PLUGIN_CHANGES_CHANNEL } from "./stores/key-cache.ts";
import { createChangeWatch } from "./platform/db/change-watch.ts";
import { createDurableCommitter, type DurableCommitter } from "./platform/db/durable.ts";
import { createProjector, type Projector } from "./readmodel/projector.ts";
import { createSequencer, type Sequencer } from "./events/events.sequencer.ts";
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
  /** The migrations applied when these services were created (none when the schema was current). */
  appliedMigrations: AppliedMigration[];
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
  /** Payments (and the merchant's cancel and refund) commit through it: durable before they are answered. */
  committer: DurableCommitter;
  /** Rebuilds the read model's stale documents after the writes commit; `serve` runs it, tests drain it. */
  projector: Projector;
  /** Numbers committed events for the feed; `serve` runs it, and every feed read catches its store up. */
  sequencer: Sequencer;
  /** Called after a payment (or an ignored delivery's log lines) committed: `serve` kicks its loops. */
  onCommitted(listener: () => void): () => void;
  /** Read API pages, built on reader threads (READ_THREADS). */
  reads: ReadsService;
  /** Payment webhooks in flight hold finished read pages back (src/readmodel/priority-gate.ts). */
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
  /** Told which migrations are about to run (serve logs them). */
  migrations?: MigrationObserver;
  now?: () => number;
  /**
   * Start the sandbox's workers now (benchmarks) instead of on the first plugin run. `serve` starts them on
   * the first run too: an idle service holds no worker (bench/README.md, "Footprint").
   */
  warmSandbox?: boolean;
  /** Refuse to start when SECRETS_KEY cannot open the stored plugin secrets (serve). */
  checkSecretsKey?: boolean;
  /** Sees the text of every statement the services send through Kysely (tests count a payment's). */
  onQuery?: (sql: string, durationMs: number) => void;
  /** Where the services report failures the operator must hear of (failed webhook attempts); serve passes its logger. */
  log?: { warn(obj: object, msg: string): void };
  /** Event dispatch tuning (tests: a short attempt timeout and schedule). */
  dispatch?: Partial<DispatcherOptions> & { timeoutMs?: number; signingNow?: () => number };
}

/** What a failed webhook attempt's log line says: who did not take which event, and what follows. Never the answer's body. */
function failedAttemptMessage(a: AttemptReport, result: SendResult): string {
  const how = result.ok ? `answered ${result.status}` : `did not answer (${result.error})`;
  // A refused address is the operator's to allow, on the server that sends.
  const hint = !result.ok && result.error.includes("private or reserved") ? "; ENDPOINT_ALLOW (host:port) in the server's environment allows it" : "";
  const next = a.outcome === "gone" ? "endpoint disabled" : a.outcome === "exhausted" ? "given up after the last retry" : "will be retried";
  return `webhook attempt ${a.attempt} of event ${a.eventId} failed: endpoint ${a.endpointId} ${how}; ${next}${hint}`;
}

/** PostgreSQL connections of the event dispatcher's own pool: claims and results, a few statements a second. */
const DISPATCH_POOL_SIZE = 2;
/**
 * PostgreSQL connections whose statements are planned once, without their values: the payments' grouped
 * reads (one at a time) and the projector's passes (one at a time).
 */
const PLANNED_ONCE_POOL_SIZE = 2;

/** Defers the worker pool until a plugin first runs or compiles: most commands never need it, nor an idle service. */
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
  const db = openDatabase(config.database, { walCheckpoints: true, savepointsInMemory: true, ...(options.onQuery ? { onQuery: options.onQuery } : {}) });
  let appliedMigrations: AppliedMigration[] = [];
  try {
    if (options.migrate ?? true) appliedMigrations = await db.migrate(options.migrations);
  } catch (err) {
    await db.close();
    throw err;
  }
  const now = options.now ?? Date.now;
  const invoicesRepo = createInvoicesRepository(db);
  const metrics = createMetrics({ pgPool: db.pgPool, dialect: db.dialect, build: buildInfo() });
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
  const changes = createChangeWatch(db, config.database.kind === "postgres" ? config.database.url : null);
  const rememberedPlugins = createKeyCache<RunnablePlugin>(changes, PLUGIN_CHANGES_CHANNEL, now, config.apiKeyCacheSeconds * 1000);
  const plugins = createPluginsService(db.kysely, box, sandbox, now, rememberedPlugins);
  const deliveries = createDeliveriesRepository(db.kysely);
  const committer = createDurableCommitter(db.kysely, config.database, { afterCommit: () => db.walCheckpoints?.wake() });
  // PostgreSQL: statements that find their rows by key whatever their values, whose cost the server would
  // otherwise plan again on every run (an array's length changes its estimate): the payments' grouped reads
  // (payment.postgres.ts) and the projector's passes (createProjector). A pool of their own, planned once,
  // by key (database.ts, BY_KEY_SETTINGS). They write nothing but the read model's documents, rebuilt from
  // their marks after a crash: their commits do not wait for the disk (`rebuildableWrites`).
  const plannedOnceDb =
    db.dialect === "postgres"
      ? openDatabase(config.database, { poolSize: PLANNED_ONCE_POOL_SIZE, byKey: true, rebuildableWrites: true, ...(options.onQuery ? { onQuery: options.onQuery } : {}) })
      : null;
  // On SQLite the projector's batches are built on a thread of the reads service (made below).
  const projector = createProjector(db.kysely, Date.now, () => reads.builder, plannedOnceDb?.kysely);
  observeReadModel(metrics, () => projector.backlog());
  const sequencer = createSequencer(db.kysely, db.dialect);
  const committedListeners = new Set<() => void>();
  const committed = () => {
    for (const listener of committedListeners) listener();
  };
  const webhooks = createWebhookService({
    db: db.kysely,
    committer,
    // PostgreSQL: the reads, and the writes, of payments ready together go as one statement (payment.postgres.ts).
    ...(db.dialect === "postgres" ? { paymentStatements: postgresPaymentStatements(db.kysely, plannedOnceDb!.kysely) } : {}),
    onCommitted: committed,
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
  const endpoints = createEndpointsRepository(db.kysely);
  observeOutboundBacklog(metrics, () => endpoints.backlog(now()), now);
  const events = createEventsService({
    db: db.kysely,
    events: createEventsRepository(db.kysely),
    endpoints,
    box,
    policy: sender.policy,
    sender,
    sequencer,
    retentionDays: config.events.retentionDays,
    now,
  });
  const { timeoutMs: _timeout, signingNow, ...dispatchOptions } = options.dispatch ?? {};
  // PostgreSQL: the dispatcher's own small pool, so sending events never takes a connection a payment waits for.
  const dispatchDb = db.dialect === "postgres" ? openDatabase(config.database, { poolSize: DISPATCH_POOL_SIZE }) : null;
  const dispatcher = createDispatcher({
    db: (dispatchDb ?? db).kysely,
    dialect: db.dialect,
    box,
    sender,
    now,
    ...(signingNow ? { signingNow } : {}),
    onAttempt: (result, createdAt, attempt) => {
      const succeeded = attempt.outcome === "succeeded";
      // `succeeded` as the attempt's record says; its `failed` is split by how the receiver failed.
      metrics.eventAttempts.inc({ result: succeeded ? "succeeded" : result.ok ? "rejected" : "no_answer" });
      if (succeeded) metrics.eventDeliveryLag.observe(Math.max(0, now() - createdAt) / 1000);
      else options.log?.warn({ ...attempt, ...(result.ok ? { status: result.status } : { error: result.error }) }, failedAttemptMessage(attempt, result));
    },
    // Half the slots at most for one endpoint: a slow one never takes all of them.
    options: { concurrency: config.events.dispatchConcurrency, perEndpoint: Math.max(1, Math.floor(config.events.dispatchConcurrency / 2)), ...dispatchOptions },
  });
  metrics.trackLoop("event_dispatcher", () => dispatcher.lastSuccessAt());
  const customersRepo = createCustomersRepository(db);
  const keyCache = createKeyCache<AuthenticatedKey>(changes, KEY_CHANGES_CHANNEL, now, config.apiKeyCacheSeconds * 1000);
  const stores = createStoresService(db.kysely, now, keyCache);
  const paymentsFirst = createPriorityGate(config.readYieldMaxMs, eventLoopBusy(config.readYieldBusyPercent));
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
    holdFrom: config.readYieldMinPages,
    timer: (stage, seconds) => metrics.readPageSeconds.observe({ stage }, seconds),
  });
  return {
    config,
    db,
    appliedMigrations,
    stores,
    customers: { ...customersRepo, ...createCustomersService(db.kysely, now) },
    invoices: { ...invoicesRepo, ...createInvoicesService(db.kysely, invoicesRepo, now) },
    invoiceLifecycle: createInvoiceLifecycleService({ db: db.kysely, dialect: db.dialect, invoices: invoicesRepo, committer, paymentWindowMinutes: config.invoicePaymentWindowMinutes, now }),
    plugins,
    deliveries,
    webhooks,
    events,
    dispatcher,
    committer,
    projector,
    sequencer,
    onCommitted(listener) {
      committedListeners.add(listener);
      return () => committedListeners.delete(listener);
    },
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
      await changes.close();
      await dispatchDb?.close();
      await plannedOnceDb?.close();
      await db.close();
    },
  };
}
