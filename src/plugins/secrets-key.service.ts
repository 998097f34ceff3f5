// SECRETS_KEY against the secrets already stored: checked at start-up (a service that cannot open them
// would answer every delivery 503), and moved to a new key by `storefront secrets rekey`.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import type { SecretBox } from "./secrets.ts";

export class SecretsKeyMismatch extends Error {
  readonly installations: number;

  constructor(installations: number) {
    super(
      `SECRETS_KEY cannot open the secrets of ${installations} installed plugin(s): it is not the key they were stored with. ` +
        "Start with the original SECRETS_KEY, or move them to this key with `storefront secrets rekey --from <old key>`.",
    );
    this.name = "SecretsKeyMismatch";
    this.installations = installations;
  }
}

/** Throws SecretsKeyMismatch when any stored secrets do not open with the box's key. */
export async function assertSecretsKeyOpensStoredSecrets(db: Kysely<Database>, box: SecretBox): Promise<void> {
  const rows = await db.selectFrom("plugin_installations").select("secrets").where("secrets", "!=", "").execute();
  const unreadable = rows.filter((r) => box.open(r.secrets) === null).length;
  if (unreadable > 0) throw new SecretsKeyMismatch(unreadable);
}

export interface RekeyReport {
  /** Re-encrypted from the old key to the new one. */
  moved: number;
  /** Already under the new key (a rekey run twice, or installed after the switch). */
  alreadyNew: number;
  /** Open with neither key: left as they are, listed for the operator. */
  unreadable: { storeId: string; name: string }[];
}

/** Re-encrypts every installation's secrets from `from` to `to` in one transaction; nothing changes if any cannot be opened. */
export async function rekeySecrets(db: Kysely<Database>, from: SecretBox, to: SecretBox): Promise<RekeyReport> {
  return db.transaction().execute(async (tx) => {
    const rows = await tx.selectFrom("plugin_installations").select(["id", "store_id", "name", "secrets"]).where("secrets", "!=", "").execute();
    const report: RekeyReport = { moved: 0, alreadyNew: 0, unreadable: [] };
    const updates: { id: string; sealed: string }[] = [];
    for (const row of rows) {
      if (to.open(row.secrets) !== null) {
        report.alreadyNew++;
        continue;
      }
      const opened = from.open(row.secrets);
      if (opened === null) {
        report.unreadable.push({ storeId: row.store_id, name: row.name });
        continue;
      }
      updates.push({ id: row.id, sealed: to.seal(opened) });
    }
    if (report.unreadable.length > 0) return report; // all or nothing: the operator decides
    for (const u of updates) await tx.updateTable("plugin_installations").set({ secrets: u.sealed }).where("id", "=", u.id).execute();
    report.moved = updates.length;
    return report;
  });
}
