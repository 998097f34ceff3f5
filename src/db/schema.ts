// Table row types for Kysely. Column names are snake_case; timestamps are integer milliseconds since the
// epoch (UTC) and money is integer cents, identically on SQLite and PostgreSQL (see docs/decisions/0001).
import type { Generated } from "kysely";

export interface StoresTable {
  id: string;
  name: string;
  created_at: number;
}

export interface ApiKeysTable {
  id: string;
  store_id: string;
  /** SHA-256 of the key, hex. The key itself is never stored. */
  key_hash: string;
  /** First characters of the key, for recognising it in listings. */
  key_prefix: string;
  name: string | null;
  /** Space-separated scope list. */
  scopes: string;
  created_at: number;
  revoked_at: number | null;
  last_used_at: number | null;
}

export interface CustomersTable {
  id: string;
  store_id: string;
  email: string;
  created_at: number;
}

export interface CustomerDiscordAccountsTable {
  customer_id: string;
  store_id: string;
  discord_id: string;
  email: string;
}

export interface ReviewsTable {
  id: string;
  store_id: string;
  customer_id: string;
  rating: number;
  text: string;
  product_id: string;
  created_at: number;
}

export interface CustomerSessionsTable {
  id: string;
  store_id: string;
  customer_id: string;
  ip: string;
  user_agent: string;
  country: string;
  last_used_at: number;
  created_at: number;
}

export interface InvoicesTable {
  id: string;
  store_id: string;
  customer_id: string;
  total_cents: number;
  payment_method: string;
  displayed_payment_info: string;
  created_on_session_id: string;
  left_feedback: number;
  status: string;
  discord_id: string | null;
  discord_email: string | null;
  created_at: number;
  updated_at: number;
}

export interface InvoiceFieldsTable {
  invoice_id: string;
  position: number;
  key: string;
  value: string;
  type: string;
}

export interface InvoiceItemsTable {
  invoice_id: string;
  position: number;
  store_id: string;
  customer_id: string;
  product_variant_id: string;
  quantity: number;
  price_cents: number;
  coupon_id: string | null;
}

export interface InvoiceLogsTable {
  id: Generated<number>;
  invoice_id: string;
  log: string;
  type: string;
  created_at: number;
}

export interface PluginInstallationsTable {
  id: string;
  store_id: string;
  name: string;
  enabled: number;
  current_version: number;
  /** AES-256-GCM sealed JSON object of the secrets ("" when none). */
  secrets: string;
  /** Space-separated names of the secrets, for showing without decrypting. */
  secret_names: string;
  created_at: number;
  updated_at: number;
}

export interface PluginVersionsTable {
  installation_id: string;
  version: number;
  source: string;
  source_sha256: string;
  catalog_name: string | null;
  created_at: number;
}

export interface DeliveriesTable {
  id: string;
  store_id: string;
  plugin_name: string;
  plugin_version: number | null;
  replay_of: string | null;
  method: string;
  /** JSON objects / arrays stored as text, identically on both dialects. */
  headers: string;
  query: string;
  body: Buffer;
  outcome: string;
  result: string | null;
  error: string | null;
  logs: string;
  fetches: string;
  invoice_id: string | null;
  transition: string | null;
  duration_ms: number;
  response_status: number;
  response_body: string;
  created_at: number;
}

/** The read model (migration 0009): an element of a list operation as the JSON it sends. */
export interface ViewsTable {
  id: string;
  store_id: string;
  body: string;
}

export interface Database {
  stores: StoresTable;
  api_keys: ApiKeysTable;
  customers: CustomersTable;
  customer_discord_accounts: CustomerDiscordAccountsTable;
  reviews: ReviewsTable;
  customer_sessions: CustomerSessionsTable;
  invoices: InvoicesTable;
  invoice_fields: InvoiceFieldsTable;
  invoice_items: InvoiceItemsTable;
  invoice_logs: InvoiceLogsTable;
  plugin_installations: PluginInstallationsTable;
  plugin_versions: PluginVersionsTable;
  deliveries: DeliveriesTable;
  customer_views: ViewsTable;
  invoice_views: ViewsTable;
}
