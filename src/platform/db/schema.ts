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
  /** The API version (`YYYY-MM-DD`) the key is answered in unless a request pins another. */
  api_version: Generated<string>;
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
  /** The customer's created_at (never changes): orders the product's reviews in customer page order. */
  customer_created_at: number;
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
  /** The invoice's and the customer's created_at (never change): the `id` filter walks items in page order. */
  invoice_created_at: number;
  customer_created_at: number;
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
  /** JSON array of the CIDR ranges deliveries may come from; null: anywhere (migration 0018). */
  allowed_sources: string | null;
  created_at: number;
  updated_at: number;
}

export interface PluginVersionsTable {
  installation_id: string;
  version: number;
  source: string;
  source_sha256: string;
  catalog_name: string | null;
  /** Why it was saved (the console's deploy note); null when none was given (0021). */
  note: string | null;
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
  /** Size of the body as received; larger than body when an unverified body was cut (null: before 0005). */
  body_bytes: number | null;
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
  /** The provider's event id and type (0021; see payment.record.ts for where they come from). */
  event_id: string | null;
  event_type: string | null;
  created_at: number;
}

/** A payment event whose decision was applied (or found already in effect): never applied again. */
export interface AppliedEventsTable {
  store_id: string;
  plugin_name: string;
  /** "id:<eventId>" or "sha256:<hex of the raw body>". */
  event_key: string;
  delivery_id: string;
  invoice_id: string;
  created_at: number;
}

export interface EventSequencesTable {
  store_id: string;
  last_seq: number;
}

export interface EventsTable {
  /** The order events were written in (migration 0017): the sequencer numbers them by it. */
  pos: Generated<number>;
  id: string;
  store_id: string;
  /** Per store, gap-free, given after commit by the sequencer (null until then); the feed's order. */
  seq: number | null;
  type: string;
  /** The event's `data`, JSON text. */
  data: string;
  /** The invoice an invoice.* event is about (migration 0012); null for other events. */
  invoice_id: string | null;
  created_at: number;
}

export interface EventEndpointsTable {
  id: string;
  store_id: string;
  url: string;
  description: string;
  /** Space-separated event types; "" means every type. */
  types: string;
  enabled: number;
  disabled_reason: string | null;
  /** Sealed JSON {current, previous?}. */
  secrets: string;
  previous_secret_expires_at: number | null;
  api_version: Generated<string>;
  failing_since: number | null;
  last_success_at: number | null;
  created_at: number;
  updated_at: number;
}

export interface EventDeliveriesTable {
  id: string;
  store_id: string;
  event_id: string;
  endpoint_id: string;
  status: string;
  attempts: number;
  next_attempt_at: number;
  claim_token: string | null;
  manual: number;
  created_at: number;
  updated_at: number;
}

export interface EventAttemptsTable {
  id: string;
  store_id: string;
  delivery_id: string;
  event_id: string;
  endpoint_id: string;
  attempt: number;
  outcome: string;
  response_status: number | null;
  error: string | null;
  response_excerpt: string;
  /** The answer's headers as a JSON object (0021; "{}" before it, and when no answer came). */
  response_headers: string;
  duration_ms: number;
  created_at: number;
}

/** The read model (migration 0009): an element of a list operation as the JSON it sends. */
export interface ViewsTable {
  id: string;
  store_id: string;
  /** The element's own creation time: the documents are indexed in page order (migration 0015). */
  created_at: number;
  /** The element as the list operations send it; null once a write made it stale and nobody refreshed it. */
  body: string | null;
}

/** A document made stale by a write (migration 0017): its owner's id; rebuilt and deleted by the projector. */
export interface StaleDocumentsTable {
  pos: Generated<number>;
  doc_id: string;
  created_at: number;
}

/** A customer document's mark: on SQLite, a write to one of its invoices names that invoice (migration 0027). */
export interface StaleCustomerDocumentsTable extends StaleDocumentsTable {
  invoice_id: string | null;
}

export interface ConsoleUsersTable {
  id: string;
  email: string;
  password_hash: string;
  /** Space-separated store ids. */
  stores: string;
  created_at: number;
}

export interface ConsoleSessionsTable {
  id_hash: string;
  user_id: string | null;
  csrf_token: string;
  created_at: number;
  last_seen_at: number;
  expires_at: number;
  /** Admin-token sessions: HMAC-SHA256 of id_hash under the admin token that opened it (migration 0018). */
  admin_token_tag: string | null;
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
  applied_events: AppliedEventsTable;
  event_sequences: EventSequencesTable;
  events: EventsTable;
  event_endpoints: EventEndpointsTable;
  event_deliveries: EventDeliveriesTable;
  event_attempts: EventAttemptsTable;
  customer_views: ViewsTable;
  invoice_views: ViewsTable;
  stale_customer_views: StaleCustomerDocumentsTable;
  stale_invoice_views: StaleDocumentsTable;
  console_users: ConsoleUsersTable;
  console_sessions: ConsoleSessionsTable;
}
