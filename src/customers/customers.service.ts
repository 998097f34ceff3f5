// Creating customers (admin API, command line). Reads go through the repository.
import type { Kysely } from "kysely";
import type { Database } from "../platform/db/schema.ts";
import { AppError } from "../errors.ts";
import { newId } from "../lib/ids.ts";
import type { CreateCustomerBody } from "../schemas/customers.schemas.ts";

export interface CreatedCustomer {
  id: string;
  email: string;
  createdAt: string;
  storeCustomerDiscordAccount: { discordId: string; email: string } | null;
}

export interface CustomersService {
  create(storeId: string, input: CreateCustomerBody): Promise<CreatedCustomer>;
}

export function createCustomersService(db: Kysely<Database>, now: () => number = Date.now): CustomersService {
  return {
    async create(storeId, input) {
      const store = await db.selectFrom("stores").select("id").where("id", "=", storeId).executeTakeFirst();
      if (!store) throw new AppError("store_not_found", `No store ${storeId}`, { param: "storeId" });
      const id = newId("cus");
      const createdAt = now();
      await db.transaction().execute(async (tx) => {
        await tx.insertInto("customers").values({ id, store_id: storeId, email: input.email, created_at: createdAt }).execute();
        if (input.discordId !== undefined) {
          await tx
            .insertInto("customer_discord_accounts")
            .values({ customer_id: id, store_id: storeId, discord_id: input.discordId, email: input.discordEmail ?? input.email })
            .execute();
        }
      });
      return {
        id,
        email: input.email,
        createdAt: new Date(createdAt).toISOString(),
        storeCustomerDiscordAccount:
          input.discordId === undefined ? null : { discordId: input.discordId, email: input.discordEmail ?? input.email },
      };
    },
  };
}
