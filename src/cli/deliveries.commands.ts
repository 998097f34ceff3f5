// `storefront deliveries …`: one delivery shown or replayed, old ones pruned, and the log searched by
// outcome, plugin, invoice and time (`list`) and followed as new deliveries arrive (`tail`, polling the
// database), with the same filters as the admin API.
import { InvalidArgumentError, type Command } from "commander";
import { followDeliveries } from "../payments/deliveries.follow.ts";
import { parseDeliveryFilters } from "../payments/deliveries.filters.ts";
import type { DeliverySummary } from "../payments/deliveries.repository.ts";
import { encodeCursor } from "../lib/list-query.ts";
import { AppError } from "../errors.ts";
import { replayView } from "../payments/payment-views.ts";
import { emit, type JsonOption, printJson, printTable, withServices } from "./context.ts";

const COLUMNS = ["id", "createdAt", "pluginName", "pluginVersion", "outcome", "responseStatus", "invoiceId", "transition", "durationMs"];

const positive = (v: string) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError("must be a positive whole number");
  return n;
};

interface FilterOptions {
  store: string;
  plugin?: string;
  outcome?: string;
  invoice?: string;
  since?: string;
  until?: string;
  json?: boolean;
}

function withFilterOptions(command: Command): Command {
  return command
    .requiredOption("--store <storeId>", "store id")
    .option("--plugin <name>", "only this plugin")
    .option("--outcome <outcomes>", "one outcome or several, comma-separated (e.g. plugin_error,plugin_timeout)")
    .option("--invoice <invoiceId>", "only deliveries about this invoice")
    .option("--since <when>", "arrived at or after: ISO 8601, or a duration back from now (30m, 1h, 7d)")
    .option("--json", "JSON instead of a table (tail: one JSON object per line)");
}

const filtersOf = (opts: FilterOptions, now: number) =>
  parseDeliveryFilters({ pluginName: opts.plugin, outcome: opts.outcome, invoiceId: opts.invoice, since: opts.since, until: opts.until }, now);

/** One line per delivery for `tail`, in the table's column order. */
function line(d: DeliverySummary): string {
  const cell = (v: unknown) => (v === null || v === undefined ? "-" : String(v));
  return `${d.createdAt}  ${d.id}  ${d.pluginName} v${cell(d.pluginVersion)}  ${d.outcome}  ${d.responseStatus}  ${cell(d.invoiceId)}  ${cell(d.transition)}  ${d.durationMs} ms\n`;
}

/** `deliveries show|replay|prune`: the group itself, registered with the plugins (`list` and `tail` join it below). */
export function registerDeliveryRecordCommands(program: Command): void {
  const deliveries = program.command("deliveries").description("the webhook delivery log");
  deliveries
    .command("show <deliveryId>")
    .description("a delivery: request, result, logs, fetches, response")
    .requiredOption("--store <storeId>", "store id")
    .action(async (id: string, opts: JsonOption & { store: string }) => {
      await withServices(async (s) => {
        const d = await s.deliveries.get(opts.store, id);
        if (!d) throw new AppError("delivery_not_found", `No delivery ${id} in store ${opts.store}`);
        printJson(d);
      });
    });
  deliveries
    .command("replay <deliveryId>")
    .description("run a stored delivery again through the plugin's current version (recorded as a new delivery)")
    .requiredOption("--store <storeId>", "store id")
    .action(async (id: string, opts: JsonOption & { store: string }) => {
      await withServices(async (s) => printJson(replayView(await s.webhooks.replay(opts.store, id, "cli"), id)));
    });
  deliveries
    .command("prune")
    .description("delete deliveries older than DELIVERY_RETENTION_DAYS")
    .action(async (opts: JsonOption) => {
      await withServices(async (s) => {
        const deleted = await s.webhooks.pruneDeliveries();
        emit(opts, { deleted }, () => process.stdout.write(`deleted ${deleted} deliveries\n`));
      });
    });
}

/** `deliveries list|tail`, added to the group above. */
export function registerDeliveryCommands(program: Command): void {
  const deliveries = program.commands.find((c) => c.name() === "deliveries") ?? program.command("deliveries").description("the webhook delivery log");

  withFilterOptions(deliveries.command("list").description("search the delivery log, newest first"))
    .option("--until <when>", "arrived at or before: ISO 8601, or a duration back from now")
    .option("--limit <n>", "how many", positive, 20)
    .action(async (opts: FilterOptions & { limit: number }) => {
      await withServices(async (s) => {
        const filters = filtersOf(opts, s.now());
        await s.stores.requireStore(opts.store);
        const { deliveries: rows, next } = await s.deliveries.list(opts.store, { ...filters, limit: opts.limit, after: null });
        // --json: the admin API's page shape.
        const page = { data: rows, pagination: { limit: opts.limit, nextCursor: next === null ? null : encodeCursor(next) } };
        emit(opts, page, () => printTable(rows as unknown as Record<string, unknown>[], COLUMNS));
      });
    });

  withFilterOptions(deliveries.command("tail").description("show the latest deliveries, then follow new ones as they arrive (Ctrl-C stops)"))
    .option("--lines <n>", "how many recent deliveries to show first", (v) => (v === "0" ? 0 : positive(v)), 10)
    .option("--interval <ms>", "how often to look for new deliveries", positive, 1000)
    .action(async (opts: FilterOptions & { lines: number; interval: number }) => {
      await withServices(async (s) => {
        const filters = filtersOf(opts, s.now());
        await s.stores.requireStore(opts.store);
        const stop = new AbortController();
        const onSignal = () => stop.abort();
        process.once("SIGINT", onSignal);
        process.once("SIGTERM", onSignal);
        try {
          await followDeliveries(s.deliveries, opts.store, filters, {
            backlog: opts.lines,
            intervalMs: opts.interval,
            // A delivery commits when its plugin finishes: up to the wall-time limit (plus a worker's start) after it arrived.
            overlapMs: 2 * s.config.plugin.wallMs + 5_000,
            signal: stop.signal,
            now: s.now,
            onDelivery: (d) => process.stdout.write(opts.json ? JSON.stringify(d) + "\n" : line(d)),
          });
        } finally {
          process.off("SIGINT", onSignal);
          process.off("SIGTERM", onSignal);
        }
      });
    });
}
