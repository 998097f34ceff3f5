// `storefront simulate`: a plugin run against a body and headers, nothing changed; exits 1 when the run fails.
import type { Command } from "commander";
import { simulationView } from "../payments/payment-views.ts";
import { collect, parseHeaders, parsePairs, positiveInt } from "./arguments.ts";
import { type JsonOption, printJson, readInput, withServices } from "./context.ts";

type SimulateOptions = JsonOption & { store: string; plugin: string; body: string; header: string[]; query: string[]; version?: number };

export function registerSimulateCommand(program: Command): void {
  program
    .command("simulate")
    .description("run a plugin against a body and headers without changing anything; exits 1 when the run fails")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--plugin <name>", "plugin name")
    .requiredOption("--body <file>", "file with the raw webhook body ('-' for standard input)")
    .option("--header <'name: value'>", "a request header (repeatable)", collect, [])
    .option("--query <name=value>", "a query parameter (repeatable)", collect, [])
    .option("--version <n>", "plugin version (default: current)", positiveInt)
    .action(async (opts: SimulateOptions) => {
      const body = readInput(opts.body, "--body");
      const headers = parseHeaders(opts.header);
      const query = parsePairs(opts.query, "query parameter");
      await withServices(async (s) => {
        const out = simulationView(await s.webhooks.simulate(opts.store, opts.plugin, { body, headers, query, ...(opts.version ? { version: opts.version } : {}) }));
        printJson(out);
        if (out.error !== null) process.exitCode = 1;
      });
    });
}
