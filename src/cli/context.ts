// Shared plumbing of the command line: configuration from the environment (and .env), services on the
// configured database, output for people (tables, lines) and for scripts (--json), and the one place that
// turns ordinary mistakes into one line and a non-zero exit code. Commands are thin adapters over the
// same services as the API.
import { readFileSync } from "node:fs";
import { CommanderError, type Command } from "commander";
import { ConfigError, loadConfig, loadDotEnv, type Config } from "../config.ts";
import { DatabaseTooOldError, SchemaTooNewError } from "../platform/db/migrate.ts";
import { AppError } from "../errors.ts";
import { RELEASE } from "../platform/ops/release.ts";
import { SecretsKeyMismatch } from "../platform/crypto/secrets-key.service.ts";
import type { ServiceOptions, Services } from "../services.ts";

/** The configuration from the environment (and .env); only `serve` is refused a bad PORT, HOST or HTTP_* value. */
export function cliConfig(options: { listening?: boolean } = {}): Readonly<Config> {
  loadDotEnv();
  return loadConfig(process.env, { listening: options.listening ?? false });
}

/** Services on the configured database (migrated); a database that cannot be opened is a CliError. */
export async function openServices(config: Readonly<Config>, options: ServiceOptions = {}): Promise<Services> {
  // Loaded here, not at start-up: --help, --version and mistakes in the arguments answer at once.
  const { createServices } = await import("../services.ts");
  try {
    return await createServices(config, options);
  } catch (err) {
    throw describeDatabaseFailure(err, config) ?? err;
  }
}

/** Runs `fn` with services on the configured database (migrated), closing them afterwards. */
export async function withServices<T>(fn: (services: Services) => Promise<T>): Promise<T> {
  const services = await openServices(cliConfig());
  try {
    return await fn(services);
  } finally {
    await services.close();
  }
}

/** A mistake the user can fix: printed as one line (`error: …`), exit code 1, no stack. */
export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "CliError";
  }
}

/** Every command's options carry `json` (added to all of them in main.ts). */
export interface JsonOption {
  json?: boolean;
}

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + "\n");
}

/** The result of a command: with --json the value as JSON (the admin API's shape), else `human()`. */
export function emit<T>(opts: JsonOption, value: T, human?: (value: T) => void): void {
  if (opts.json || human === undefined) printJson(value);
  else human(value);
}

/** A list: with --json `{data: rows}` as the admin API answers it, else a table of `columns`. */
export function emitList<T extends object>(opts: JsonOption, rows: T[], columns: string[], cells: (row: T) => Record<string, unknown> = (r) => r as Record<string, unknown>): void {
  emit(opts, { data: rows }, () => printTable(rows.map(cells), columns));
}

export function printTable(rows: Record<string, unknown>[], columns: string[]): void {
  if (rows.length === 0) {
    process.stdout.write("(none)\n");
    return;
  }
  const cell = (v: unknown) => (v === null || v === undefined ? "-" : Array.isArray(v) ? v.join(",") : String(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i]!)).join("  ").trimEnd() + "\n";
  process.stdout.write(line(columns));
  for (const r of rows) process.stdout.write(line(columns.map((c) => cell(r[c]))));
}

/** A file the user named (`-` is standard input), or a CliError that says which option and why. */
export function readInput(file: string, option: string): Buffer {
  try {
    return readFileSync(file === "-" ? 0 : file);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === "ENOENT" ? "no such file" : code === "EISDIR" ? "it is a directory" : code === "EACCES" ? "permission denied" : (err as Error).message;
    throw new CliError(`cannot read ${option} ${file}: ${why}`);
  }
}

/** Adds `--json` to every command that runs something (those without subcommands), unless it has one. */
export function addJsonOptions(command: Command, except: string[] = []): void {
  for (const sub of command.commands) {
    if (except.includes(sub.name())) continue;
    if (sub.commands.length === 0 && !sub.options.some((o) => o.long === "--json")) sub.option("--json", "print the result as JSON (the admin API's shape)");
    addJsonOptions(sub);
  }
}

/** PostgreSQL or SQLite failures at connect/migrate time that name their own fix. */
export function describeDatabaseFailure(err: unknown, config: Readonly<Config>): CliError | null {
  const code = (err as { code?: unknown } | null)?.code;
  if (config.database.kind === "postgres") {
    const url = safeUrl(config.database.url);
    const name = decodeURIComponent(url?.pathname.slice(1) ?? "") || "(default)";
    const where = url ? `${url.hostname}:${url.port || "5432"}` : "the DATABASE_URL server";
    if (code === "3D000") return new CliError(`PostgreSQL database "${name}" does not exist on ${where}: create it first (createdb -h ${url?.hostname ?? "HOST"} ${name}), then run this again`);
    if (code === "28P01" || code === "28000") return new CliError(`PostgreSQL at ${where} refused the login in DATABASE_URL: ${(err as Error).message}`);
    if (code === "ECONNREFUSED" || code === "ENOTFOUND" || code === "ETIMEDOUT" || code === "EHOSTUNREACH") return new CliError(`cannot reach PostgreSQL at ${where} (${String(code)}): is it running, and is DATABASE_URL right?`);
  } else if (code === "SQLITE_NOTADB" || code === "SQLITE_CORRUPT") {
    const what = code === "SQLITE_NOTADB" ? "is not an SQLite database" : "is a damaged SQLite database";
    return new CliError(`${config.database.file} ${what} (${code}): DATABASE_URL=sqlite:<file> must name a storefront database, or a file that does not exist yet (restore a backup: docs/operations.md, "Backups")`);
  } else if (["SQLITE_CANTOPEN", "EACCES", "EROFS", "SQLITE_READONLY", "EEXIST", "ENOTDIR"].includes(String(code))) {
    return new CliError(`cannot open the SQLite database ${config.database.file} (${String(code)}): check that its directory exists and is writable, or set DATABASE_URL`);
  }
  return null;
}

function safeUrl(url: string): URL | null {
  try {
    return new URL(url);
  } catch {
    return null;
  }
}

/** Turns expected failures into one line and a non-zero exit code; bugs keep their stack. */
export function reportCliError(error: unknown): never {
  if (error instanceof ConfigError) {
    process.stderr.write(error.message + "\n");
    process.exit(78); // EX_CONFIG
  }
  if (error instanceof SecretsKeyMismatch) {
    process.stderr.write(`error: ${error.message}\n`);
    process.exit(78);
  }
  if (error instanceof SchemaTooNewError) {
    const message = error.message.replace("this release knows", `this release (${RELEASE}) knows`);
    process.stderr.write(`error: ${message}: run the newer release, or restore a backup taken before the upgrade\n`);
    process.exit(78);
  }
  if (error instanceof DatabaseTooOldError) {
    process.stderr.write(`error: ${error.message}: upgrade PostgreSQL (docs/deploy.md)\n`);
    process.exit(78);
  }
  if (error instanceof AppError) {
    process.stderr.write(`error: ${error.code}: ${error.message}\n`);
    process.exit(1);
  }
  if (error instanceof CliError) {
    process.stderr.write(`error: ${error.message}\n`);
    process.exit(1);
  }
  if (error instanceof CommanderError) {
    // An InvalidArgumentError thrown inside an action (the parser's own errors are printed by commander).
    process.stderr.write(`error: ${error.message.replace(/^error: /, "")}\n`);
    process.exit(error.exitCode || 1);
  }
  const sys = error as NodeJS.ErrnoException | null;
  if (sys?.syscall !== undefined && sys.path !== undefined && (sys.code === "ENOENT" || sys.code === "EACCES" || sys.code === "EISDIR")) {
    process.stderr.write(`error: ${sys.code === "ENOENT" ? "no such file" : sys.code === "EISDIR" ? "a directory, not a file" : "permission denied"}: ${sys.path}\n`);
    process.exit(1);
  }
  throw error;
}
