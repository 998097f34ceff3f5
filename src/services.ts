// Explicit wiring: builds the database, repositories and services once. The server, the command line and
// the tests all start from here (tests on a fresh database).
import type { FastifyRequest } from "fastify";
import type { Config } from "./config.ts";
import { type Db, openDatabase } from "./db/database.ts";
import { createCustomersRepository, type CustomersRepository } from "./customers/customers.repository.ts";
import { createCustomersService, type CustomersService } from "./customers/customers.service.ts";
import { createInvoicesRepository, type InvoicesRepository } from "./invoices/invoices.repository.ts";
import { createInvoicesService, type InvoicesService } from "./invoices/invoices.service.ts";
import { createMetrics, type Metrics } from "./ops/metrics.ts";
import { createDeliveriesRepository, type DeliveriesRepository } from "./plugins/deliveries.repository.ts";
import { createReadsService, type ReadsService } from "./reads/reads.service.ts";
import { createPluginsService, type PluginsService } from "./plugins/plugins.service.ts";
import { createSecretBox, resolveSecretsKey } from "./plugins/secrets.ts";
import { createWebhookService, type WebhookService } from "./plugins/webhook.service.ts";
import { createSandbox, type Sandbox } from "./sandbox/index.ts";
import { createStoresService, type StoresService } from "./stores/stores.service.ts";

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
  plugins: PluginsService;
  deliveries: DeliveriesRepository;
  webhooks: WebhookService;
  /** Read API pages, built on reader threads (READ_THREADS). */
  reads: ReadsService;
  sandbox: Sandbox;
  metrics: Metrics;
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
  const invoicesRepo = createInvoicesRepository(db.kysely);
  const sandbox = options.warmSandbox ? createSandbox(config.plugin) : lazySandbox(config.plugin);
  const box = createSecretBox(resolveSecretsKey(config).key);
  const plugins = createPluginsService(db.kysely, box, sandbox, now);
  const deliveries = createDeliveriesRepository(db.kysely);
  const webhooks = createWebhookService({
    db: db.kysely,
    plugins,
    invoices: invoicesRepo,
    deliveries,
    sandbox,
    retentionDays: config.deliveryRetentionDays,
    now,
  });
  const customersRepo = createCustomersRepository(db.kysely, db.dialect);
  const reads = createReadsService({ database: config.database, threads: config.readThreads, nice: config.readThreadsNice, repos: { customers: customersRepo, invoices: invoicesRepo } });
  return {
    config,
    db,
    stores: createStoresService(db.kysely, now),
    customers: { ...customersRepo, ...createCustomersService(db.kysely, now) },
    invoices: { ...invoicesRepo, ...createInvoicesService(db.kysely, invoicesRepo, now) },
    plugins,
    deliveries,
    webhooks,
    reads,
    sandbox,
    metrics: createMetrics(),
    readRateLimit: {
      max: config.rateLimit.max,
      timeWindow: config.rateLimit.windowMs,
      hook: "preValidation",
      keyGenerator: (request) => (request.apiKey ? `key:${request.apiKey.keyId}` : `ip:${request.ip}`),
    },
    close: async () => {
      await reads.close();
      await sandbox.close();
      await db.close();
    },
  };
}
