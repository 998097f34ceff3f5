// `storefront seed`: a demo store with realistic data, or millions of customers for benchmarks, then a new
// API key and a curl line to try it. A thin adapter over src/seed/.
import { randomBytes } from "node:crypto";
import type cliProgress from "cli-progress";
import { InvalidArgumentError, type Command } from "commander";
import { parseIsoDate } from "../lib/list-query.ts";
import type { SeedProgress } from "../seed/seed.ts";
import { CliError, type JsonOption, printJson, withServices } from "./context.ts";

interface SeedCommandOptions extends JsonOption {
  demo?: boolean;
  customers?: number;
  store?: string;
  name?: string;
  seed?: number;
  until?: number;
}

const count = (v: string): number => {
  const n = Number(v.replace(/_/g, ""));
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("must be a positive whole number");
  return n;
};
const int32 = (v: string): number => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0 || n > 0xffffffff) throw new InvalidArgumentError("must be a whole number from 0 to 4294967295");
  return n;
};
const date = (v: string): number => {
  const ms = parseIsoDate(v, false);
  if (ms === null) throw new InvalidArgumentError("must be a date (2025-01-31) or an ISO 8601 date-time");
  return ms;
};

export function registerSeedCommand(program: Command): void {
  program
    .command("seed")
    .description("fill a store with realistic generated data and print an API key to try it")
    .option("--demo", "a new demo store with a few hundred customers")
    .option("--customers <n>", "number of customers (each with ~5 invoices, ~2 reviews, ~3 sessions)", count)
    .option("--store <storeId>", "add to this existing store instead of creating one")
    .option("--name <name>", "name of the new store (default: a generated company name)")
    .option("--seed <int>", "seed of the generator: the same seed gives the same ids and data (default: random, printed)", int32)
    .option("--until <date>", "end of the data's three-year time span (default: today 00:00 UTC)", date)
    .addHelpText(
      "after",
      "\nExamples:\n  storefront seed --demo\n  storefront seed --customers 1000000 --seed 42\n  storefront seed --customers 5000 --store st_… --seed 7\n",
    )
    .action(async (opts: SeedCommandOptions) => {
      if (!opts.demo && opts.customers === undefined) throw new CliError("give --demo (a demo store) or --customers <n> (see storefront seed --help)");
      if (opts.demo && opts.customers !== undefined) throw new CliError("give --demo or --customers <n>, not both");
      const seed = opts.seed ?? randomBytes(4).readUInt32BE(0);
      const { DEMO_CUSTOMERS, seedWithKey } = await import("../seed/seed.ts"); // faker and friends: only when seeding
      const customers = opts.customers ?? DEMO_CUSTOMERS;
      await withServices(async (services) => {
        const progress = progressBar((await import("cli-progress")).default);
        const result = await seedWithKey(services, {
          customers,
          seed,
          ...(opts.store !== undefined ? { storeId: opts.store } : {}),
          ...(opts.name !== undefined ? { storeName: opts.name } : {}),
          ...(opts.until !== undefined ? { until: opts.until } : {}),
          onProgress: progress.update,
        });
        progress.stop();
        const { config } = services;
        const base = `http://${urlHost(config.host)}:${config.port}/api/${config.apiNamespace}`;
        const curl = ["customers", "invoices"].map((list) => `curl -H "Authorization: ${result.key}" "${base}/${list}?limit=2"`);
        if (opts.json) {
          const { ms, from, until, ...rest } = result;
          printJson({ ...rest, from: new Date(from).toISOString(), until: new Date(until).toISOString(), durationMs: Math.round(ms), curl });
          return;
        }
        const seconds = result.ms / 1000;
        const out = [
          `${result.createdStore ? "Created" : "Added to"} store "${result.storeName}" (${result.storeId}): ${result.customers.toLocaleString("en-US")} customers, ` +
            `${result.rows.toLocaleString("en-US")} rows in ${seconds.toFixed(1)} s (${Math.round(result.rows / seconds).toLocaleString("en-US")} rows/s), seed ${result.seed}.`,
          `Data spans ${new Date(result.from).toISOString().slice(0, 10)} to ${new Date(result.until).toISOString().slice(0, 10)}.`,
          "",
          `API key (shown once): ${result.key}`,
          "",
          `Try it (with \`storefront serve\` running on ${config.database.kind === "sqlite" ? "this SQLite file" : "this database"}, PORT ${config.port}):`,
          ...curl.map((line) => `  ${line}`),
        ];
        process.stdout.write(out.join("\n") + "\n");
      });
    });
}

/**
 * Progress bars on standard error when it is a terminal (generating, then loading); silent otherwise.
 * `lib` is cli-progress, loaded by the seed alone: no other command (nor `serve`) loads it.
 */
function progressBar(lib: typeof cliProgress): { update: (p: SeedProgress) => void; stop: () => void } {
  if (!process.stderr.isTTY) return { update: () => {}, stop: () => {} };
  const bars = new lib.MultiBar(
    {
      stream: process.stderr,
      format: "{phase} [{bar}] {percentage}% | {value}/{total} {unit} | ETA {eta_formatted} {note}",
      hideCursor: true,
      etaBuffer: 20,
      clearOnComplete: false,
      formatValue: (v, _options, type) => (type === "value" || type === "total" ? v.toLocaleString("en-US") : String(v)),
    },
    lib.Presets.shades_classic,
  );
  const current: { phase: string; bar: cliProgress.SingleBar | null } = { phase: "", bar: null };
  return {
    update: (p) => {
      if (current.phase !== p.phase) {
        current.bar?.stop();
        current.phase = p.phase;
        current.bar =
          p.phase === "generate"
            ? bars.create(p.total, 0, { phase: "generating", unit: "customers", note: "" })
            : bars.create(p.total, 0, { phase: "loading   ", unit: "rows", note: "" });
      }
      current.bar!.update(p.done, p.phase === "load" ? { note: `(${p.table} done)` } : {});
    },
    stop: () => bars.stop(),
  };
}

/** 0.0.0.0 / :: listen everywhere; curl needs an address to connect to. */
function urlHost(host: string): string {
  if (host === "0.0.0.0" || host === "::" || host === "") return "127.0.0.1";
  return host.includes(":") ? `[${host}]` : host;
}
