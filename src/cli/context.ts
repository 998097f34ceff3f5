// Shared plumbing of the command line: configuration from the environment (and .env), services on the
// configured database, and output helpers. Commands are thin adapters over the same services as the API.
import { ConfigError, loadConfig, loadDotEnv, type Config } from "../config.ts";
import { AppError } from "../errors.ts";
import { SecretsKeyMismatch } from "../plugins/secrets-key.service.ts";
import { createServices, type Services } from "../services.ts";

export function cliConfig(): Readonly<Config> {
  loadDotEnv();
  return loadConfig();
}

/** Runs `fn` with services on the configured database (migrated), closing them afterwards. */
export async function withServices<T>(fn: (services: Services) => Promise<T>): Promise<T> {
  const services = await createServices(cliConfig());
  try {
    return await fn(services);
  } finally {
    await services.close();
  }
}

export function printJson(value: unknown): void {
  process.stdout.write(JSON.stringify(value, null, 2) + "\n");
}

export function printTable(rows: Record<string, unknown>[], columns: string[]): void {
  if (rows.length === 0) {
    process.stdout.write("(none)\n");
    return;
  }
  const cell = (v: unknown) => (v === null || v === undefined ? "-" : String(v));
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
  const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i]!)).join("  ").trimEnd() + "\n";
  process.stdout.write(line(columns));
  for (const r of rows) process.stdout.write(line(columns.map((c) => cell(r[c]))));
}

/** Turns expected failures into a one-line message and exit code 1; bugs keep their stack. */
export function reportCliError(error: unknown): never {
  if (error instanceof ConfigError) {
    process.stderr.write(error.message + "\n");
    process.exit(78); // EX_CONFIG
  }
  if (error instanceof SecretsKeyMismatch) {
    process.stderr.write(`error: ${error.message}\n`);
    process.exit(78);
  }
  if (error instanceof AppError) {
    process.stderr.write(`error: ${error.code}: ${error.message}\n`);
    process.exit(1);
  }
  throw error;
}
