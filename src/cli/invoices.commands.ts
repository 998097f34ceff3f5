// `storefront invoices cancel|refund|expire`: the invoice lifecycle on the local database, through the same
// service (and state machine) as the admin API and the server's expiry loop.
import type { Command } from "commander";
import { printJson, withServices } from "./context.ts";

export function registerInvoiceCommands(program: Command): void {
  const invoices = program.commands.find((c) => c.name() === "invoices") ?? program.command("invoices").description("a store's invoices: cancel, refund, expire");

  for (const action of ["cancel", "refund"] as const) {
    invoices
      .command(`${action} <invoiceId>`)
      .description(action === "cancel" ? "cancel a pending invoice (pending -> cancelled)" : "mark a completed or disputed invoice refunded (-> refunded)")
      .requiredOption("--store <storeId>", "store id")
      .option("--reason <text>", "added to the invoice's log line")
      .action(async (invoiceId: string, opts: { store: string; reason?: string }) => {
        await withServices(async (s) => {
          const input = { actor: "command line" as const, ...(opts.reason !== undefined ? { reason: opts.reason } : {}) };
          printJson(action === "cancel" ? await s.invoiceLifecycle.cancel(opts.store, invoiceId, input) : await s.invoiceLifecycle.refund(opts.store, invoiceId, input));
        });
      });
  }

  invoices
    .command("expire")
    .description("expire now every pending invoice past INVOICE_PAYMENT_WINDOW_MINUTES (serve does this every 30 s)")
    .option("--json", "print {expired} as JSON")
    .action(async (opts: { json?: boolean }) => {
      await withServices(async (s) => {
        const { expired } = await s.invoiceLifecycle.expireDue();
        if (opts.json) printJson({ expired, paymentWindowMinutes: s.config.invoicePaymentWindowMinutes });
        else if (s.config.invoicePaymentWindowMinutes === 0) process.stdout.write("expiry is off (INVOICE_PAYMENT_WINDOW_MINUTES=0)\n");
        else process.stdout.write(`expired ${expired} pending invoice${expired === 1 ? "" : "s"} older than ${s.config.invoicePaymentWindowMinutes} min\n`);
      });
    });
}
