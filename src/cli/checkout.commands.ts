// `storefront customers create` and `storefront checkout`: a customer and a pending invoice, made the way
// the storefront makes them, to try plugins against.
import type { Command } from "commander";
import { collect, parseItem, parsePairs } from "./arguments.ts";
import { type JsonOption, printJson, withServices } from "./context.ts";

type StoreOption = JsonOption & { store: string };

export function registerCustomerCommands(program: Command): void {
  const customers = program.command("customers").description("a store's customers");
  customers
    .command("create")
    .description("create a customer")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--email <email>", "e-mail address")
    .option("--discord-id <id>", "linked chat account id")
    .option("--discord-email <email>", "linked chat account e-mail")
    .action(async (opts: StoreOption & { email: string; discordId?: string; discordEmail?: string }) => {
      await withServices(async (s) =>
        printJson(await s.customers.create(opts.store, { email: opts.email, ...(opts.discordId ? { discordId: opts.discordId } : {}), ...(opts.discordEmail ? { discordEmail: opts.discordEmail } : {}) })),
      );
    });
}

export function registerCheckoutCommand(program: Command): void {
  program
    .command("checkout")
    .description("create a pending invoice (the storefront's checkout)")
    .requiredOption("--store <storeId>", "store id")
    .requiredOption("--customer <customerId>", "customer id")
    .requiredOption("--item <variant:quantity:price[:coupon]>", "a line item (repeatable), price in USD", collect, [])
    .option("--payment-method <name>", "payment method", "stripe")
    .option("--field <key=value>", "a custom field of type text (repeatable)", collect, [])
    .action(async (opts: StoreOption & { customer: string; item: string[]; paymentMethod: string; field: string[] }) => {
      const items = opts.item.map(parseItem);
      const fields = Object.entries(parsePairs(opts.field, "field")).map(([key, value]) => ({ key, value, type: "text" }));
      await withServices(async (s) => printJson(await s.invoices.checkout(opts.store, { customerId: opts.customer, paymentMethod: opts.paymentMethod, items, ...(fields.length ? { fields } : {}) })));
    });
}
