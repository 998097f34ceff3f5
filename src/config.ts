// Environment → one frozen, typed Config, checked once at start-up.
// Every problem is collected so a bad deployment fails with the whole list, each line naming its variable.
import { existsSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseTrustProxy, type TrustProxy } from "./lib/client-address.ts";
import type { DatabaseConfig } from "./platform/db/database.ts";
import { createAddressPolicy } from "./platform/outbound/address-policy.ts";
import type { SandboxLimits } from "./sandbox/sandbox.types.ts";
import type { LogFormat } from "./platform/ops/logger.ts";

/** The sandbox limits (docs/plugins.md, "Limits"), as the sandbox takes them. */
export type PluginLimitsConfig = SandboxLimits;

export interface Config {
  port: number;
  host: string;
  /** `sqlite:<file>` (embedded default) or a `postgres://` URL. */
  databaseUrl: string;
  database: DatabaseConfig;
  /** Directory of the embedded database; generated secrets (SECRETS_KEY) are kept beside it. */
  dataDir: string;
  apiNamespace: string;
  adminToken: string | null;
  secretsKey: string | null;
  logLevel: "fatal" | "error" | "warn" | "info" | "debug" | "trace" | "silent";
  /** LOG_FORMAT: pretty (people) or json (machines); null decides by the terminal (src/platform/ops/logger.ts). */
  logFormat: LogFormat | null;
  /** /metrics: on its own port (METRICS_PORT; null: the main port), behind a bearer token (METRICS_TOKEN; null: open). */
  metrics: { port: number | null; token: string | null };
  rateLimit: { max: number; windowMs: number };
  webhookRateLimit: { max: number; windowMs: number };
  /** Deliveries nobody verified (rejected, unknown or disabled plugin), per store and client address. */
  webhookUnverifiedLimit: { max: number; windowMs: number };
  /** Failed API key and admin token attempts, per client address. */
  authFailureLimit: { max: number; windowMs: number };
  /** Bodies of unverified deliveries are kept up to this many bytes. */
  deliveryUnverifiedBodyBytes: number;
  /** Per store, the delivery log is cut (oldest first) to this many bytes of bodies; 0 = no cap. */
  deliveryStoreMaxBytes: number;
  webhookBodyLimitBytes: number;
  deliveryRetentionDays: number;
  /** Pending invoices expire this long after creation; 0 turns expiry off. */
  invoicePaymentWindowMinutes: number;
  /** Events out (docs/events.md). */
  events: { retentionDays: number; endpointAllow: string[]; dispatchConcurrency: number };
  /** Who the client is behind proxies (src/lib/client-address.ts). */
  trustProxy: TrustProxy;
  /** Slow and idle clients: how long a request may take to arrive, how long a silent connection stays open, how many at once. */
  http: HttpLimitsConfig;
  plugin: PluginLimitsConfig;
  /** Threads that build read API pages, each with its own database connection; 0 builds them on the main thread. */
  readThreads: number;
  /** Linux nice value of the reader threads: 10 lets the webhook's thread run first when cores are busy. */
  readThreadsNice: number;
  /** A finished read page waits at most this long while payment webhooks are in flight (READ_YIELD_MAX_MS; 0: never waits). */
  readYieldMaxMs: number;
  /** …and only while the main thread's event loop was busy at least this % of the last 100 ms (READ_YIELD_BUSY_PERCENT; 0: whenever a webhook is in flight). */
  readYieldBusyPercent: number;
  /** …and only while at least this many pages are in flight, the waiting one included (READ_YIELD_MIN_PAGES; 1: any page). */
  readYieldMinPages: number;
  /**
   * How long an authenticated API key may be remembered at most (API_KEY_CACHE_SECONDS; 0: looked up on
   * every request). Any change to a key forgets them all at once (src/stores/key-cache.ts).
   */
  apiKeyCacheSeconds: number;
  /** The console's sessions end after this long without a request (CONSOLE_SESSION_IDLE_MINUTES), and 12 h after sign-in at the latest. */
  consoleSessionIdleMinutes: number;
  /** Live delivery streams (console SSE): per session, and per process (at most half of HTTP_MAX_CONNECTIONS). */
  consoleStreams: { perSession: number; max: number };
}

export interface HttpLimitsConfig {
  /** The request's headers must have arrived within this (HTTP_HEADERS_TIMEOUT_MS); else 408 and closed. */
  headersTimeoutMs: number;
  /** The whole request, body included, must have arrived within this (HTTP_REQUEST_TIMEOUT_MS). */
  requestTimeoutMs: number;
  /** A connection with no traffic either way for this long is closed, kept-alive ones included (HTTP_IDLE_TIMEOUT_MS). */
  idleTimeoutMs: number;
  /** Connections open at once; more are closed as they arrive (HTTP_MAX_CONNECTIONS). */
  maxConnections: number;
  /** On SIGTERM/SIGINT, `serve` exits (code 1, saying what it was waiting for) if draining takes longer (SHUTDOWN_TIMEOUT_MS). */
  shutdownTimeoutMs: number;
}

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(problems.length === 1 ? `Invalid configuration: ${problems[0]}` : `Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
    this.problems = problems;
  }
}

type Env = Record<string, string | undefined>;

/** Reads `.env` from the working directory into process.env when present (real env vars win). */
export function loadDotEnv(file = ".env"): void {
  if (existsSync(file)) process.loadEnvFile(file);
}

const LOG_LEVELS = ["fatal", "error", "warn", "info", "debug", "trace", "silent"] as const;
const LOG_FORMATS: readonly LogFormat[] = ["pretty", "json"];

/** Where and how the server listens: only `serve` uses them, so only `serve` is stopped by a bad value. */
const LISTENING = /^(PORT|HOST|HTTP_[A-Z_]+)\b/;

export interface LoadOptions {
  /** False for commands that never listen: a bad PORT, HOST or HTTP_* value is not theirs to refuse. */
  listening?: boolean;
}

export function loadConfig(env: Env = process.env, options: LoadOptions = {}): Readonly<Config> {
  const read = envReader(env);
  // Section by section in this order, so that the list names the problems in the order it always has.
  const server = readServer(read);
  const storage = readDatabase(read);
  const access = readAccess(read);
  const logging = readLogging(read);
  const metrics = readMetrics(read, server.port);
  const pool = readPluginPool(read);
  const http = readHttpLimits(read, pool.wallMs);
  const consoleStreams = readConsoleStreams(read, http);
  const trustProxy = readTrustProxy(read);
  const limits = readRequestLimits(read);
  const events = readEvents(read);
  const reading = readReadPath(read);
  const consoleSessionIdleMinutes = read.int("CONSOLE_SESSION_IDLE_MINUTES", 60, 1, 720);
  const plugin = readPluginLimits(read, pool);
  checkEndpointAllow(read, events.endpointAllow);

  const config: Config = { ...server, ...storage, ...access, ...logging, metrics, ...limits, events, trustProxy, http, ...reading, consoleSessionIdleMinutes, consoleStreams, plugin };
  const relevant = options.listening === false ? read.problems.filter((p) => !LISTENING.test(p)) : read.problems;
  if (relevant.length > 0) throw new ConfigError(relevant);
  return deepFreeze(config);
}

/** Reads variables with their defaults; a value out of shape is noted in `problems` (and the default kept). */
interface EnvReader {
  env: Env;
  problems: string[];
  str(name: string, fallback: string): string;
  int(name: string, fallback: number, min: number, max: number): number;
  /** Comma-separated, blanks dropped. */
  list(name: string): string[];
}

function envReader(env: Env): EnvReader {
  const problems: string[] = [];
  const str = (name: string, fallback: string): string => {
    const v = env[name];
    return v === undefined || v === "" ? fallback : v;
  };
  const int = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === "") return fallback;
    if (!/^\d+$/.test(raw.trim())) {
      problems.push(`${name} must be a whole number, got "${raw}"`);
      return fallback;
    }
    const n = Number(raw);
    if (n < min || n > max) problems.push(`${name} must be between ${min} and ${max}, got ${n}`);
    return n;
  };
  const list = (name: string): string[] =>
    str(name, "")
      .split(",")
      .map((s) => s.trim())
      .filter((s) => s !== "");
  return { env, problems, str, int, list };
}

function readServer(read: EnvReader): Pick<Config, "port" | "host"> {
  return { port: read.int("PORT", 3000, 0, 65535), host: read.str("HOST", "127.0.0.1") };
}

function readDatabase(read: EnvReader): Pick<Config, "databaseUrl" | "database" | "dataDir"> {
  const databaseUrl = read.str("DATABASE_URL", "sqlite:./data/storefront.db");
  let database: Config["database"] = { kind: "sqlite", file: "./data/storefront.db" };
  if (/^postgres(ql)?:\/\//.test(databaseUrl)) {
    try {
      const url = new URL(databaseUrl);
      database = { kind: "postgres", url: databaseUrl };
      // PostgreSQL would pick a database itself (the user's name), and the service would create its tables there.
      if (decodeURIComponent(url.pathname.replace(/^\//, "")) === "") {
        read.problems.push(`DATABASE_URL names no database: add its name to the path (postgres://${url.username ? `${decodeURIComponent(url.username)}@` : ""}${url.host}/storefront)`);
      }
    } catch {
      // libpq takes postgres://user@/db for a Unix socket; a WHATWG URL (and so this service) needs a host.
      read.problems.push(`DATABASE_URL is not a valid URL (a Unix socket goes in a host parameter: postgres://user@localhost/storefront?host=/var/run/postgresql)`);
    }
  } else if (databaseUrl.startsWith("sqlite:")) {
    const file = databaseUrl.slice("sqlite:".length).replace(/^\/\/(?=\/)/, "");
    if (file === "") read.problems.push(`DATABASE_URL "sqlite:" needs a file path, e.g. sqlite:./data/storefront.db`);
    database = { kind: "sqlite", file };
  } else {
    read.problems.push(`DATABASE_URL must start with sqlite: or postgres://, got "${databaseUrl}"`);
  }
  const dataDir = database.kind === "sqlite" && database.file !== ":memory:" ? path.dirname(path.resolve(database.file)) : path.resolve("./data");
  return { databaseUrl, database, dataDir };
}

/** The read API's path segment, and the secrets: the admin token and the key that encrypts plugin secrets. */
function readAccess(read: EnvReader): Pick<Config, "apiNamespace" | "adminToken" | "secretsKey"> {
  const { env, problems } = read;
  const apiNamespace = read.str("API_NAMESPACE", "service");
  if (!/^[a-z0-9][a-z0-9-]{0,62}$/i.test(apiNamespace)) {
    problems.push(`API_NAMESPACE must be one path segment of letters, digits and dashes, got "${apiNamespace}"`);
  } else if (["admin", "paymentPlugins"].includes(apiNamespace)) {
    problems.push(`API_NAMESPACE must not be "${apiNamespace}": that path is taken`);
  }

  const adminToken = env.ADMIN_TOKEN ? env.ADMIN_TOKEN : null;
  if (adminToken !== null && adminToken.length < 16) problems.push(`ADMIN_TOKEN must be at least 16 characters`);

  const secretsKey = env.SECRETS_KEY ? env.SECRETS_KEY : null;
  if (secretsKey !== null && !isValidSecretsKey(secretsKey)) {
    problems.push(`SECRETS_KEY must be 32 bytes as 64 hex characters or base64`);
  }
  return { apiNamespace, adminToken, secretsKey };
}

function readLogging(read: EnvReader): Pick<Config, "logLevel" | "logFormat"> {
  const logLevel = read.str("LOG_LEVEL", "info") as Config["logLevel"];
  if (!LOG_LEVELS.includes(logLevel)) read.problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(", ")}, got "${logLevel}"`);

  const logFormatText = read.str("LOG_FORMAT", "");
  const logFormat = logFormatText === "" ? null : (logFormatText as LogFormat);
  if (logFormat !== null && !LOG_FORMATS.includes(logFormat)) read.problems.push(`LOG_FORMAT must be pretty or json (unset: pretty on a terminal outside production, else json), got "${logFormatText}"`);
  return { logLevel, logFormat };
}

function readMetrics(read: EnvReader, port: number): Config["metrics"] {
  const { env, problems } = read;
  const metricsPort = env.METRICS_PORT === undefined || env.METRICS_PORT === "" ? null : read.int("METRICS_PORT", 0, 1, 65535);
  if (metricsPort !== null && metricsPort === port) problems.push(`METRICS_PORT must differ from PORT (${port}); unset it to serve /metrics on PORT`);
  const metricsToken = env.METRICS_TOKEN ? env.METRICS_TOKEN : null;
  if (metricsToken !== null && metricsToken.length < 16) problems.push(`METRICS_TOKEN must be at least 16 characters`);
  return { port: metricsPort, token: metricsToken };
}

/** What the HTTP limits are checked against, so read before them: the pool's size, its reach, a run's wall clock. */
interface PluginPool {
  poolSize: number;
  fetchAllow: string[];
  wallMs: number;
}

function readPluginPool(read: EnvReader): PluginPool {
  const poolSize = read.int("PLUGIN_POOL_SIZE", os.availableParallelism(), 1, 256);
  const fetchAllow = read.list("PLUGIN_FETCH_ALLOW");
  try {
    createAddressPolicy(fetchAllow); // the same parse the sandbox does: a bad entry stops start-up here
  } catch (err) {
    read.problems.push(err instanceof RangeError ? err.message : `PLUGIN_FETCH_ALLOW: ${String(err)}`);
  }
  return { poolSize, fetchAllow, wallMs: read.int("PLUGIN_WALL_MS", 10_000, 10, 300_000) };
}

function readHttpLimits(read: EnvReader, pluginWallMs: number): HttpLimitsConfig {
  const http: HttpLimitsConfig = {
    headersTimeoutMs: read.int("HTTP_HEADERS_TIMEOUT_MS", 10_000, 100, 600_000),
    requestTimeoutMs: read.int("HTTP_REQUEST_TIMEOUT_MS", 30_000, 100, 3_600_000),
    // Longer than the 60 s after which common proxies drop idle upstream connections (Fastify's keep-alive default).
    idleTimeoutMs: read.int("HTTP_IDLE_TIMEOUT_MS", 72_000, 100, 3_600_000),
    maxConnections: read.int("HTTP_MAX_CONNECTIONS", 1000, 1, 1_000_000),
    shutdownTimeoutMs: read.int("SHUTDOWN_TIMEOUT_MS", 30_000, 100, 600_000),
  };
  if (http.headersTimeoutMs > http.requestTimeoutMs) read.problems.push(`HTTP_HEADERS_TIMEOUT_MS (${http.headersTimeoutMs}) must not be longer than HTTP_REQUEST_TIMEOUT_MS (${http.requestTimeoutMs})`);
  // A webhook waits silently for its plugin: the idle timeout must not cut it off.
  if (http.idleTimeoutMs <= pluginWallMs) read.problems.push(`HTTP_IDLE_TIMEOUT_MS (${http.idleTimeoutMs}) must be longer than PLUGIN_WALL_MS (${pluginWallMs})`);
  return http;
}

/**
 * An open stream holds a connection for as long as the page is open: the console may take a share of
 * HTTP_MAX_CONNECTIONS, never so much that webhooks find none left.
 */
function readConsoleStreams(read: EnvReader, http: HttpLimitsConfig): Config["consoleStreams"] {
  const streamsCeiling = Math.max(1, Math.floor(http.maxConnections / 2));
  const consoleStreams = {
    perSession: read.int("CONSOLE_STREAMS_PER_SESSION", 4, 1, 1000),
    max: read.int("CONSOLE_STREAMS_MAX", Math.max(1, Math.floor(http.maxConnections / 4)), 1, 1_000_000),
  };
  if (consoleStreams.max > streamsCeiling) read.problems.push(`CONSOLE_STREAMS_MAX (${consoleStreams.max}) must be at most half of HTTP_MAX_CONNECTIONS (${streamsCeiling}): the rest is kept for webhooks and the API`);
  return consoleStreams;
}

function readTrustProxy(read: EnvReader): TrustProxy {
  const parsed = parseTrustProxy(read.env.TRUST_PROXY);
  if ("problem" in parsed) read.problems.push(parsed.problem);
  return "value" in parsed ? parsed.value : { kind: "none" };
}

type RequestLimits = Pick<
  Config,
  "rateLimit" | "webhookRateLimit" | "webhookUnverifiedLimit" | "authFailureLimit" | "deliveryUnverifiedBodyBytes" | "deliveryStoreMaxBytes" | "webhookBodyLimitBytes" | "deliveryRetentionDays" | "invoicePaymentWindowMinutes"
>;

/** Rate limits, webhook bodies and the delivery log's size, how long deliveries and pending invoices last. */
function readRequestLimits(read: EnvReader): RequestLimits {
  const { int } = read;
  return {
    rateLimit: { max: int("RATE_LIMIT_MAX", 600, 1, 1e9), windowMs: int("RATE_LIMIT_WINDOW_MS", 60_000, 1000, 86_400_000) },
    webhookRateLimit: {
      max: int("WEBHOOK_RATE_LIMIT_MAX", 1200, 1, 1e9),
      windowMs: int("WEBHOOK_RATE_LIMIT_WINDOW_MS", 60_000, 1000, 86_400_000),
    },
    webhookUnverifiedLimit: {
      max: int("WEBHOOK_UNVERIFIED_LIMIT_MAX", 60, 1, 1e9),
      windowMs: int("WEBHOOK_UNVERIFIED_LIMIT_WINDOW_MS", 60_000, 1000, 86_400_000),
    },
    authFailureLimit: {
      max: int("AUTH_FAILURE_LIMIT_MAX", 30, 1, 1e9),
      windowMs: int("AUTH_FAILURE_LIMIT_WINDOW_MS", 60_000, 1000, 86_400_000),
    },
    deliveryUnverifiedBodyBytes: int("DELIVERY_UNVERIFIED_BODY_BYTES", 4096, 0, 1024 * 1024),
    deliveryStoreMaxBytes: int("DELIVERY_STORE_MAX_MB", 512, 0, 1024 * 1024) * 1024 * 1024,
    webhookBodyLimitBytes: int("WEBHOOK_BODY_LIMIT_BYTES", 1024 * 1024, 1024, 64 * 1024 * 1024),
    deliveryRetentionDays: int("DELIVERY_RETENTION_DAYS", 30, 0, 3650),
    invoicePaymentWindowMinutes: int("INVOICE_PAYMENT_WINDOW_MINUTES", 60, 0, 525_600),
  };
}

function readEvents(read: EnvReader): Config["events"] {
  return {
    retentionDays: read.int("EVENT_RETENTION_DAYS", 30, 0, 3650),
    endpointAllow: read.list("ENDPOINT_ALLOW"),
    dispatchConcurrency: read.int("EVENT_DISPATCH_CONCURRENCY", 32, 1, 1024),
  };
}

/** ENDPOINT_ALLOW takes PLUGIN_FETCH_ALLOW's entries: the same parse, its own name in the problem. */
function checkEndpointAllow(read: EnvReader, endpointAllow: string[]): void {
  try {
    createAddressPolicy(endpointAllow);
  } catch (err) {
    read.problems.push(`ENDPOINT_ALLOW: ${err instanceof Error ? err.message.replace(/^PLUGIN_FETCH_ALLOW: /, "") : String(err)}`);
  }
}

/** The read API's threads, how long a page gives way to webhooks, how long an API key is remembered. */
function readReadPath(read: EnvReader): Pick<Config, "readThreads" | "readThreadsNice" | "readYieldMaxMs" | "readYieldBusyPercent" | "readYieldMinPages" | "apiKeyCacheSeconds"> {
  return {
    // One core is left to the thread that answers webhooks.
    readThreads: read.int("READ_THREADS", Math.max(1, Math.min(4, os.availableParallelism() - 1)), 0, 64),
    readThreadsNice: read.int("READ_THREADS_NICE", 5, 0, 19),
    readYieldMaxMs: read.int("READ_YIELD_MAX_MS", 50, 0, 10_000),
    readYieldBusyPercent: read.int("READ_YIELD_BUSY_PERCENT", 70, 0, 100),
    readYieldMinPages: read.int("READ_YIELD_MIN_PAGES", 4, 1, 10_000),
    apiKeyCacheSeconds: read.int("API_KEY_CACHE_SECONDS", 60, 0, 3600),
  };
}

function readPluginLimits(read: EnvReader, pool: PluginPool): PluginLimitsConfig {
  const { int } = read;
  return {
    poolSize: pool.poolSize,
    // One store's runs occupy at most this many workers; the rest stay free for other stores.
    maxConcurrentPerStore: int("PLUGIN_MAX_CONCURRENT_PER_STORE", Math.max(1, pool.poolSize - 1), 1, 256),
    maxQueuedPerStore: int("PLUGIN_MAX_QUEUED_PER_STORE", 50, 0, 100_000),
    cpuMs: int("PLUGIN_CPU_MS", 250, 1, 60_000),
    wallMs: pool.wallMs,
    memoryBytes: int("PLUGIN_MEMORY_MB", 32, 1, 1024) * 1024 * 1024,
    maxFetches: int("PLUGIN_MAX_FETCHES", 10, 0, 1000),
    fetchTimeoutMs: int("PLUGIN_FETCH_TIMEOUT_MS", 5_000, 1, 300_000),
    fetchMaxBytes: int("PLUGIN_FETCH_MAX_BYTES", 1024 * 1024, 1, 256 * 1024 * 1024),
    maxLogLines: int("PLUGIN_MAX_LOG_LINES", 100, 0, 100_000),
    maxLogBytes: int("PLUGIN_MAX_LOG_BYTES", 2048, 1, 1024 * 1024),
    maxResultBytes: int("PLUGIN_MAX_RESULT_BYTES", 64 * 1024, 64, 16 * 1024 * 1024),
    fetchAllow: pool.fetchAllow,
  };
}

/** The database for a person: the SQLite file, or PostgreSQL's host, port and database name (never the login). */
export function describeDatabase(database: Config["database"]): string {
  if (database.kind === "sqlite") return `SQLite ${database.file}`;
  const url = new URL(database.url);
  const name = decodeURIComponent(url.pathname.slice(1)) || "(the login's default database)";
  return `PostgreSQL ${url.hostname}:${url.port || "5432"}/${name}`;
}

export function isValidSecretsKey(value: string): boolean {
  if (/^[0-9a-f]{64}$/i.test(value)) return true;
  return /^[A-Za-z0-9+/_-]+=*$/.test(value) && Buffer.from(value, "base64").length === 32;
}

function deepFreeze<T>(value: T): Readonly<T> {
  if (value !== null && typeof value === "object") {
    for (const v of Object.values(value)) deepFreeze(v);
    Object.freeze(value);
  }
  return value;
}
