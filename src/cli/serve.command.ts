// `storefront serve`: migrate (saying what it applies), listen, run the background loops, and on SIGTERM/SIGINT
// finish the requests in flight, then exit.
import type { Command } from "commander";
import type { FastifyBaseLogger, FastifyInstance } from "fastify";
import type { Logger } from "pino";
import { type Config, describeDatabase } from "../config.ts";
import type { Services } from "../services.ts";
import { CliError, cliConfig, describeDatabaseFailure, openServices } from "./context.ts";
import { type BackgroundLoop, startBackgroundLoop } from "../platform/ops/background-loop.ts";
import { startFollowers } from "../followers.ts";
import { DatabaseInUseError, holdServeLock, type ServeLock } from "../platform/db/serve-lock.ts";
import { RELEASE, SCHEMA_VERSION } from "../platform/ops/release.ts";
import { MIGRATION_NAMES } from "../platform/db/migrate.ts";

/** How often `serve` looks for pending invoices past their payment window. */
const EXPIRY_INTERVAL_MS = 30_000;

export function registerServeCommand(program: Command): void {
  program
    .command("serve")
    .description("migrate the database and serve the HTTP API")
    .action(async () => {
      const config = cliConfig({ listening: true });
      const lock = serveLock(config);
      const { createLogger } = await import("../platform/ops/logger.ts");
      const logger = createLogger({ level: config.logLevel, format: config.logFormat });
      const services = await openMigrated(config, logger).catch((err: unknown) => {
        lock.release();
        throw err;
      });
      const { buildApp } = await import("../app.ts");
      const app = await buildApp(services, { loggerInstance: logger });
      const background: { loops: BackgroundLoop[]; pruneTimer: NodeJS.Timeout | null } = { loops: [], pruneTimer: null };
      let stopping = false;
      const stop = (signal: string) => {
        if (stopping) return;
        stopping = true;
        if (background.pruneTimer) clearInterval(background.pruneTimer);
        app.log.info({ signal }, "shutting down: finishing requests in flight");
        // Which step a shutdown that does not finish is stuck in, said before the forced exit.
        let step = "finishing requests in flight";
        const force = setTimeout(() => {
          app.log.error({ step, timeoutMs: config.http.shutdownTimeoutMs }, `shutdown did not finish within ${config.http.shutdownTimeoutMs} ms (stuck ${step}); exiting`);
          process.exit(1);
        }, config.http.shutdownTimeoutMs);
        force.unref();
        const next = (name: string) => () => {
          step = name;
        };
        app
          .close()
          .then(next("stopping the background loops"))
          .then(() => Promise.all(background.loops.map((loop) => loop.stop())))
          .then(next("stopping outbound webhooks"))
          .then(() => services.dispatcher.stop())
          .then(next("closing the sandbox, reader threads and database"))
          .then(() => services.close())
          .then(() => process.exit(0))
          .catch((err: unknown) => {
            app.log.error({ err }, "shutdown failed");
            process.exit(1);
          });
      };
      process.on("SIGTERM", () => stop("SIGTERM"));
      process.on("SIGINT", () => stop("SIGINT"));
      try {
        await app.listen({ port: config.port, host: config.host });
      } catch (err) {
        const problem = listenProblem(err, config);
        if (problem === null) throw err;
        await app.close().catch(() => {});
        await services.close().catch(() => {});
        throw problem;
      }
      if (!stopping) Object.assign(background, startBackgroundWork(services, app));
      const where = describeDatabase(config.database);
      const admin = config.adminToken === null ? "admin API off (no ADMIN_TOKEN)" : "admin API on";
      app.log.info({ database: where, adminApi: config.adminToken !== null }, `storefront serving on http://${config.host}:${config.port} (${where}); ${admin}; API docs at /docs`);
    });
}

/** SQLite: this process's hold on the database file (a second `serve` is refused); nothing to hold on PostgreSQL. */
function serveLock(config: Readonly<Config>): ServeLock {
  if (config.database.kind !== "sqlite") return { release: () => {} };
  try {
    return holdServeLock(config.database.file);
  } catch (err) {
    if (err instanceof DatabaseInUseError) throw new CliError(err.message);
    throw describeDatabaseFailure(err, config) ?? err;
  }
}

/** Services on the migrated database; the migrations it applies are logged as they start and once they committed. */
async function openMigrated(config: Readonly<Config>, log: Logger): Promise<Services> {
  const services = await openServices(config, {
    checkSecretsKey: true,
    log,
    migrations: {
      pending: (names) => {
        if (names.length < MIGRATION_NAMES.length) log.info({ pending: names }, `applying ${names.length} migration(s): ${names.join(", ")}`);
      },
    },
  });
  const applied = services.appliedMigrations;
  // A new database gets every migration: one line says so, each one's own line is for debugging.
  const fresh = applied.length === MIGRATION_NAMES.length;
  for (const m of applied) log[fresh ? "debug" : "info"]({ migration: m.name, durationMs: m.durationMs }, `applied migration ${m.name} in ${m.durationMs} ms`);
  if (fresh) log.info({ migrations: applied.length, durationMs: applied.reduce((sum, m) => sum + m.durationMs, 0) }, `created the schema of a new database (${applied.length} migrations)`);
  log.info({ release: RELEASE, schema: SCHEMA_VERSION }, `storefront ${RELEASE}, database schema ${SCHEMA_VERSION}`);
  return services;
}

/**
 * Retention (at start, then hourly), invoice expiry, the followers of each commit, and outbound webhooks.
 * Each loop claims its work in the database, so every process of a deployment runs all of them.
 */
function startBackgroundWork(services: Services, app: FastifyInstance): { loops: BackgroundLoop[]; pruneTimer: NodeJS.Timeout } {
  const prune = () => {
    services.webhooks
      .pruneDeliveries()
      .then((n) => n > 0 && app.log.info({ deleted: n }, "pruned old deliveries"))
      .catch((err: unknown) => app.log.error({ err }, "pruning deliveries failed"));
    services.events
      .pruneEvents()
      .then((n) => n > 0 && app.log.info({ deleted: n }, "pruned old events"))
      .catch((err: unknown) => app.log.error({ err }, "pruning events failed"));
  };
  const pruneTimer = setInterval(prune, 3_600_000);
  pruneTimer.unref();
  prune();
  const expiry = startBackgroundLoop("invoice expiry", EXPIRY_INTERVAL_MS, expiryPass(services, app.log), app.log);
  services.metrics.trackLoop("invoice_expiry", () => expiry.lastSuccessAt());
  // What follows a commit: the read model's documents and the events' numbers (kicked by this process's
  // payments, and looking for other processes' work every FOLLOW_INTERVAL_MS).
  const followers = startFollowers(services, app.log);
  // Outbound webhooks: this process claims its share of the queued events.
  services.dispatcher.start((err) => app.log.error({ err }, "event dispatch failed"));
  return { loops: [expiry, ...followers], pruneTimer };
}

/**
 * Pending invoices past INVOICE_PAYMENT_WINDOW_MINUTES, claimed in batches. The first pass after start-up
 * may expire many at once (after an upgrade from a release without expiry, or after downtime): it says so
 * as a warning naming the setting.
 */
function expiryPass(services: Services, log: FastifyBaseLogger): () => Promise<void> {
  const minutes = services.config.invoicePaymentWindowMinutes;
  let first = true;
  return async () => {
    const { expired } = await services.invoiceLifecycle.expireDue();
    if (expired > 0 && first) {
      log.warn(
        { expired, paymentWindowMinutes: minutes },
        `expired ${expired} pending invoice(s) checked out more than ${minutes} min ago, at start-up (INVOICE_PAYMENT_WINDOW_MINUTES; 0 keeps invoices pending)`,
      );
    } else if (expired > 0) {
      log.info({ expired }, "expired pending invoices past their payment window");
    }
    first = false;
  };
}

/** The address cannot be used: say which and what to change. */
function listenProblem(err: unknown, config: Readonly<Config>): CliError | null {
  const code = (err as { code?: unknown } | null)?.code;
  const where = `${config.host}:${config.port}`;
  if (code === "EADDRINUSE") return new CliError(`port ${config.port} is in use on ${config.host}: stop the other server, or choose another port (PORT=3001 storefront serve)`);
  if (code === "EACCES") return new CliError(`not allowed to listen on ${where}: use a port above 1023 (PORT=3000)`);
  if (code === "EADDRNOTAVAIL" || code === "ENOTFOUND") return new CliError(`HOST ${config.host} is not an address of this machine: use 127.0.0.1, 0.0.0.0 or one of its addresses`);
  return null;
}
