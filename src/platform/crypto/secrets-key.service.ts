// SECRETS_KEY against every value sealed with it, whatever table keeps it: the plugins' secrets and the
// outbound endpoints' signing secrets. Checked at start-up (a service that cannot open them would answer
// every delivery 503 and silently stop signing events), and moved to a new key by `storefront secrets
// rekey`, all of them in one transaction or none.
import type { Kysely } from "kysely";
import type { Database } from "../db/schema.ts";
import type { SecretBox } from "./secret-box.ts";

/** Where sealed values live. A new sealed column is added here, and start-up and rekey cover it. */
const SEALED = [
  { kind: "plugin", table: "plugin_installations", label: "installed plugin(s)" },
  { kind: "endpoint", table: "event_endpoints", label: "webhook endpoint(s)" },
] as const;

type SealedKind = (typeof SEALED)[number]["kind"];

interface SealedRow {
  kind: SealedKind;
  table: (typeof SEALED)[number]["table"];
  id: string;
  storeId: string;
  /** The plugin's name, or the endpoint's id. */
  name: string;
  sealed: string;
}

async function sealedRows(db: Kysely<Database>): Promise<SealedRow[]> {
  const plugins = await db.selectFrom("plugin_installations").select(["id", "store_id", "name", "secrets"]).where("secrets", "!=", "").orderBy("id").execute();
  const endpoints = await db.selectFrom("event_endpoints").select(["id", "store_id", "secrets"]).where("secrets", "!=", "").orderBy("id").execute();
  return [
    ...plugins.map((r) => ({ kind: "plugin" as const, table: "plugin_installations" as const, id: r.id, storeId: r.store_id, name: r.name, sealed: r.secrets })),
    ...endpoints.map((r) => ({ kind: "endpoint" as const, table: "event_endpoints" as const, id: r.id, storeId: r.store_id, name: r.id, sealed: r.secrets })),
  ];
}

export class SecretsKeyMismatch extends Error {
  /** Unreadable values per kind. */
  readonly counts: Record<SealedKind, number>;

  constructor(counts: Record<SealedKind, number>) {
    const what = SEALED.filter((s) => counts[s.kind] > 0).map((s) => `${counts[s.kind]} ${s.label}`);
    super(
      `SECRETS_KEY cannot open the secrets of ${what.join(" and ")}: it is not the key they were stored with. ` +
        "Start with the original SECRETS_KEY, or move them to this key with `storefront secrets rekey --from-file <old key file>`.",
    );
    this.name = "SecretsKeyMismatch";
    this.counts = counts;
  }
}

/** Throws SecretsKeyMismatch when any sealed value does not open with the box's key. */
export async function assertSecretsKeyOpensStoredSecrets(db: Kysely<Database>, box: SecretBox): Promise<void> {
  const counts: Record<SealedKind, number> = { plugin: 0, endpoint: 0 };
  for (const row of await sealedRows(db)) if (box.open(row.sealed) === null) counts[row.kind]++;
  if (counts.plugin + counts.endpoint > 0) throw new SecretsKeyMismatch(counts);
}

export interface RekeyReport {
  /** Re-encrypted from the old key to the new one. */
  moved: number;
  /** Already under the new key (a rekey run twice, or saved after the switch). */
  alreadyNew: number;
  /** Open with neither key: left as they are (and so is everything else), listed for the operator. */
  unreadable: { kind: SealedKind; storeId: string; name: string; id: string }[];
}

/** Re-encrypts every sealed value from `from` to `to` in one transaction; nothing changes if any cannot be opened. */
export async function rekeySecrets(db: Kysely<Database>, from: SecretBox, to: SecretBox): Promise<RekeyReport> {
  return db.transaction().execute(async (tx) => {
    const report: RekeyReport = { moved: 0, alreadyNew: 0, unreadable: [] };
    const updates: { row: SealedRow; sealed: string }[] = [];
    for (const row of await sealedRows(tx)) {
      if (to.open(row.sealed) !== null) {
        report.alreadyNew++;
        continue;
      }
      const opened = from.open(row.sealed);
      if (opened === null) {
        report.unreadable.push({ kind: row.kind, storeId: row.storeId, name: row.name, id: row.id });
        continue;
      }
      updates.push({ row, sealed: to.seal(opened) });
    }
    if (report.unreadable.length > 0) return report; // all or nothing: the operator decides
    for (const { row, sealed } of updates) await tx.updateTable(row.table).set({ secrets: sealed }).where("id", "=", row.id).execute();
    report.moved = updates.length;
    return report;
  });
}
