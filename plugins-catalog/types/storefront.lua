---@meta storefront
-- LuaLS definitions of the storefront payment-plugin environment (Lua 5.4 sandbox).
-- Not a plugin: editors read it to autocomplete and type-check plugin code. Point LuaLS at this
-- folder with .luarc.json:
--   { "runtime.version": "Lua 5.4",
--     "runtime.builtin": { "io": "disable", "os": "disable", "debug": "disable", "package": "disable" },
--     "workspace.library": ["<path to>/plugins-catalog/types"] }
-- (The built-in os library is disabled there because plugins only get os.time, os.date, os.clock and os.difftime,
-- which this file declares.)

---------------------------------------------------------------------------------------------------
-- The request
---------------------------------------------------------------------------------------------------

---The webhook request as the provider sent it.
---@class storefront.Request
---@field method string HTTP method, normally `"POST"`.
---@field body string The raw body, byte for byte. Compute signatures over this, never over re-encoded JSON.
---@field headers table<string, string> Headers with **lower-case** names (`request.headers["stripe-signature"]`); repeated headers are joined with `", "`.
---@field query table<string, string> Query parameters of the webhook URL, including `pluginName` and `storeId`.
---@field json any The decoded body when it is JSON (whatever the content type), else `nil`.

---The webhook request being handled.
---@type storefront.Request
request = {}

---@class storefront.Store
---@field id string The store's id (`st_…`).

---The store the webhook was sent to.
---@type storefront.Store
store = {}

---@class storefront.Plugin
---@field name string The name the plugin is installed under in this store.
---@field version integer The installed version that is running.

---This plugin's installation.
---@type storefront.Plugin
plugin = {}

---This store's settings for this plugin, as installed with `--secret NAME=value`. Read-only:
---writing is an error. Values are scrubbed (`[secret]`) from everything storefront records or answers.
---@type table<string, string>
secrets = {}

---------------------------------------------------------------------------------------------------
-- The result
---------------------------------------------------------------------------------------------------

---@alias storefront.ResultStatus
---| "pushInvoice"    # the invoice is paid: pending/expired/disputed -> completed
---| "disputeInvoice" # the payment is disputed: completed -> disputed
---| "ignore"         # nothing to change (invoiceId optional: your log lines then go to that invoice)

---What the main chunk returns. `invoiceId` is required with pushInvoice and disputeInvoice.
---@class storefront.Result
---@field status storefront.ResultStatus
---@field invoiceId? string

---------------------------------------------------------------------------------------------------
-- Host functions
---------------------------------------------------------------------------------------------------

---@class storefront.FetchOptions
---@field method? string HTTP method (default `"GET"`).
---@field headers? table<string, string|number> Request headers.
---@field body? string Request body (use `json.encode` for tables).
---@field timeout? number Milliseconds, at most the operator's fetch limit (5000 by default).

---@class storefront.FetchResponse
---@field status integer HTTP status.
---@field ok boolean `true` for a 2xx status.
---@field headers table<string, string> Response headers, lower-case names.
---@field body string Response body, raw bytes.

---HTTP(S) request to a public address (loopback, private, link-local, CGNAT, multicast and IPv6
---unique-local targets are refused unless the operator lists them in `PLUGIN_FETCH_ALLOW`). At most
---10 per run, 5 s and 1 MiB each by default. A response with any status is returned; `nil` and a
---message when no response came (refused address, DNS failure, timeout, too large).
---@param url string
---@param options? storefront.FetchOptions
---@return storefront.FetchResponse|nil response
---@return string? message why no response came
function fetch(url, options) end

---HMAC of `data` under `key`.
---@param key string
---@param data string
---@param hash "sha1"|"sha256"|"sha384"|"sha512"|string Any case, dashes allowed (`"SHA-256"`); another hash is an error.
---@param encoding? "hex"|"base64" Default lower-case hex.
---@return string
function hmacShaSign(key, data, hash, encoding) end

---Digest of `data`.
---@param data string
---@param hash "sha1"|"sha256"|"sha384"|"sha512"|string
---@param encoding? "hex"|"base64" Default lower-case hex.
---@return string
function sha(data, hash, encoding) end

---`true` when the two strings are equal, compared in constant time. Use it for signatures instead of `==`.
---@param a string
---@param b string
---@return boolean
function timingSafeEqual(a, b) end

---@class storefront.Base64
base64 = {}

---Standard base64 (with padding).
---@param data string
---@return string
function base64.encode(data) end

---Standard or URL-safe base64, padding optional, whitespace ignored.
---@param text string
---@return string|nil bytes `nil` on bad input
---@return string? message
function base64.decode(text) end

---@alias storefront.LogType "info"|"warning"|"error"

---Appends a line to the delivery record and, when the result names an invoice of this store, to that
---invoice's `invoiceLogs`. At most 100 lines of at most 2 KiB per run by default; more are dropped.
---@param description string
---@param type? storefront.LogType Default `"info"`.
function log(description, type) end

---Same as `log`.
---@param description string
---@param type? storefront.LogType
function insertLog(description, type) end

---`print(...)` writes its arguments, tab-separated, as an info log line.
---@param ... any
function print(...) end

---Stops the script; the provider gets `401 webhook_rejected` with this message and nothing changes.
---Use it for a bad signature, a stale timestamp or an event for another account.
---@param message? string
---@return never
function reject(message) end

---@class storefront.InvoiceItem
---@field productVariantId string
---@field quantity integer
---@field price number Unit price in US dollars.
---@field couponId? string

---@class storefront.InvoiceField
---@field key string
---@field value string
---@field type string

---@class storefront.InvoiceLog
---@field log string
---@field type string
---@field createdAt string ISO 8601.

---@class storefront.DiscordAccount
---@field discordId string
---@field email string

---@alias storefront.InvoiceStatus "pending"|"completed"|"disputed"|"refunded"|"expired"|"cancelled"

---An invoice as the list API shows it.
---@class storefront.Invoice
---@field id string
---@field totalInUsd number US dollars, at most two decimals; compare in cents: `math.floor(totalInUsd * 100 + 0.5)`.
---@field status storefront.InvoiceStatus
---@field customerId string
---@field paymentMethod string
---@field displayedPaymentInfo string
---@field createdOnSessionId string
---@field leftFeedback boolean
---@field createdAt string ISO 8601.
---@field discordAccount? storefront.DiscordAccount
---@field invoiceFields storefront.InvoiceField[]
---@field invoiceItems storefront.InvoiceItem[]
---@field invoiceLogs storefront.InvoiceLog[]

---This store's invoice, or `nil` when there is no such invoice **in this store**. Use it to check that
---the amount paid covers the invoice before returning `pushInvoice`.
---@param id string
---@return storefront.Invoice|nil
function getInvoice(id) end

---------------------------------------------------------------------------------------------------
-- JSON (dkjson-compatible; require("json") and require("dkjson") return this table)
---------------------------------------------------------------------------------------------------

---@class storefront.JsonEncodeState
---@field indent? boolean Pretty-print (objects break lines, arrays do not), as dkjson does.
---@field keyorder? string[] Keys written first, in this order.
---@field level? integer Initial indentation level (two spaces each).
---@field buffer? string[] Write into this array instead of returning a string; `encode` then returns `true`.
---@field bufferlen? integer Index of the last element of `buffer` (encode appends after it, and updates it).
---@field tables? table<table, true> Tables being encoded (cycle detection); created when absent.
---@field exception? fun(reason: "reference cycle"|"custom encoder failed"|"unsupported type", value: any, state: storefront.JsonEncodeState, defaultmessage: string): (string|true|nil), string? Called for a value that cannot be encoded: return text to insert (or `true` after writing into `state.buffer`), or `nil, message` to fail.

---@class storefront.Json
---@field null table The JSON `null` sentinel.
---@field version string
json = {}

---Encodes a value. Empty tables encode as `[]` unless they came from a decoded `{}` (or carry
---`__jsontype = "object"`); a `__tojson(self, state)` metamethod may return JSON text, or write into
---`state.buffer` and return `true`. Raises on cycles and unsupported types unless `state.exception` handles them.
---@param value any
---@param state? storefront.JsonEncodeState
---@return string|true
function json.encode(value, state) end

---Decodes JSON text, as dkjson does: the value and the position after it, or `nil`, the position of
---the error and a message ("unterminated object at line 1, column 1"). It never raises. Without
---`position` the whole text must be one JSON value. Pass `json.null` as `nullValue` to keep the `null`s
---of objects and arrays (as `json.null`) instead of losing those keys.
---@param text string
---@param position? integer
---@param nullValue? any
---@param objectmeta? table|nil Metatable of decoded objects (default `{__jsontype = "object"}`; `nil` for none).
---@param arraymeta? table|nil Metatable of decoded arrays.
---@return any value
---@return integer position the position after the value, or where the error is
---@return string? message the error, when value is nil
function json.decode(text, position, nullValue, objectmeta, arraymeta) end

---Quotes a string as a JSON string literal (with dkjson's escapes).
---@param s string
---@return string
function json.quotestring(s) end

---In a `__tojson` or exception handler: when `state.indent` is set, adds a newline and `state.level`'s indentation to `state.buffer`.
---@param state storefront.JsonEncodeState
function json.addnewline(state) end

---For `state.exception`: writes the value that could not be encoded as a string saying why (`"<reference cycle>"`).
---@param reason string
---@param value any
---@param state storefront.JsonEncodeState
---@param defaultmessage string
---@return string
function json.encodeexception(reason, value, state, defaultmessage) end

---Returns the module itself (there is no LPeg in the sandbox; the decoder is already native), so
---`require("dkjson").use_lpeg()` works.
---@return storefront.Json
function json.use_lpeg() end

---@param name "json"|"dkjson"
---@return storefront.Json
function require(name) end

---------------------------------------------------------------------------------------------------
-- What is left of os
---------------------------------------------------------------------------------------------------

---Only `os.time`, `os.date`, `os.clock` and `os.difftime` exist in plugins. The sandbox's local time is
---UTC, whatever the server's zone; in a replay `os.time()` and `os.date()` read the original delivery's time.
---@class storefront.Os
os = {}

---@class storefront.DateTable
---@field year integer
---@field month integer
---@field day integer
---@field hour? integer
---@field min? integer
---@field sec? integer
---@field isdst? boolean

---Current time in unix seconds (the run's clock in a replay), or the time of a date table, read as UTC
---and normalised (the table's fields are updated), as native Lua does.
---@param date? storefront.DateTable
---@return integer
function os.time(date) end

---Formats a time (default now) as C's strftime does in the C locale (`"!%Y-%m-%dT%H:%M:%SZ"` for ISO 8601);
---`"*t"` gives a date table. Local time is UTC (`%Z` is `UTC`, or `GMT` after `!`).
---@param format? string
---@param time? integer
---@return string|storefront.DateTable
function os.date(format, time) end

---CPU time used by the process, in seconds.
---@return number
function os.clock() end

---`t2 - t1` in seconds, as a float (`os.difftime(os.time(), t) > 300` for a tolerance check).
---@param t2 integer
---@param t1 integer
---@return number
function os.difftime(t2, t1) end
