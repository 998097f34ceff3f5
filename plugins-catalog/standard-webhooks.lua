-- standard-webhooks: any provider that signs with the Standard Webhooks spec (Svix, Polar, Dodo Payments, ...).
--
-- Install (storefront plugins install NAME --store ID --catalog standard-webhooks --secret K=V ...):
--   signingSecret     required  the endpoint's secret, "whsec_<base64>" (the part after whsec_ is the
--                               base64 of the HMAC key)
--   toleranceSeconds  optional  how far webhook-timestamp may be from now        (default "300")
--   typePath          optional  dotted path of the event type                     (default "type")
--   paidTypes         optional  comma list of event types that mean paid  (default "payment.succeeded,order.paid")
--   disputedTypes     optional  comma list meaning disputed       (default "dispute.opened,dispute.created")
--   invoiceIdPath     optional  dotted path of the storefront invoice id (default "data.metadata.invoiceId")
--   amountPath        optional  dotted path of the amount paid                (default "data.total_amount")
--   amountUnit        optional  "cents" (smallest unit, e.g. 4999) or "units" (e.g. 49.99)  (default "cents")
--   currencyPath      optional  dotted path of the currency                    (default "data.currency")
-- The defaults fit Polar's order.paid and Dodo Payments' payment.succeeded events with the invoice id
-- in the checkout's metadata.
--
-- Signature (https://www.standardwebhooks.com): headers webhook-id, webhook-timestamp (unix seconds)
-- and webhook-signature, a space-separated list of "v1,<base64>" where the base64 is HMAC-SHA256 of
-- "<webhook-id>.<webhook-timestamp>.<raw body>"; any one v1 matching is enough (key rotation).
-- Svix's svix-id / svix-timestamp / svix-signature headers are accepted as well.
--
-- Result: a paid type -> pushInvoice when the amount and currency (USD) cover the invoice; a disputed
-- type -> disputeInvoice; anything else -> ignore. An underpayment, another currency, a missing amount
-- or an invoice that is not in this store is ignored with a warning, never completed.
-- A missing or wrong signature, or a stale timestamp, is rejected (HTTP 401).

local function setting(name, default)
  local v = secrets[name]
  if v == nil or v == "" then return default end
  return v
end

local function at(tbl, path)
  local node = tbl
  for key in string.gmatch(path, "[^%.]+") do
    if type(node) ~= "table" then return nil end
    node = node[key]
  end
  if node == json.null then return nil end
  return node
end

local function setOf(list)
  local out = {}
  for item in string.gmatch(list, "[^,]+") do out[(item:gsub("^%s+", ""):gsub("%s+$", ""))] = true end
  return out
end

-- Whole cents of an amount given as a number or a decimal string, in dollars or already in cents.
local function toCents(value, unit)
  local n = tonumber(value)
  if n == nil then return nil end
  if unit == "cents" then return math.floor(n + 0.5) end
  return math.floor(n * 100 + 0.5)
end

---------------------------------------------------------------------------------------------------
-- Signature
---------------------------------------------------------------------------------------------------

local secret = setting("signingSecret", nil)
if secret == nil then
  error("standard-webhooks: the signingSecret secret is not set (whsec_...)")
end
local key = base64.decode((secret:gsub("^whsec_", "")))
if key == nil or key == "" then
  error("standard-webhooks: signingSecret is not whsec_ followed by base64")
end

local h = request.headers
local msgId = h["webhook-id"] or h["svix-id"]
local msgTimestamp = h["webhook-timestamp"] or h["svix-timestamp"]
local msgSignature = h["webhook-signature"] or h["svix-signature"]
if msgId == nil or msgTimestamp == nil or msgSignature == nil then
  reject("missing webhook-id, webhook-timestamp or webhook-signature header")
end
if not msgTimestamp:match("^%d+$") then reject("webhook-timestamp is not a unix time") end

local tolerance = tonumber(setting("toleranceSeconds", "300")) or 300
if tolerance > 0 and math.abs(os.time() - tonumber(msgTimestamp)) > tolerance then
  reject("webhook-timestamp outside the tolerance of " .. tolerance .. " seconds")
end

local expected = hmacShaSign(key, msgId .. "." .. msgTimestamp .. "." .. request.body, "sha256", "base64")
local verified = false
for entry in string.gmatch(msgSignature, "%S+") do
  local version, signature = entry:match("^([^,]+),(.+)$")
  if version == "v1" and timingSafeEqual(expected, signature) then verified = true end
end
if not verified then reject("no v1 signature matches the payload") end

---------------------------------------------------------------------------------------------------
-- The event
---------------------------------------------------------------------------------------------------

local event = request.json
if type(event) ~= "table" then
  log("signed body is not a JSON object; ignored", "warning")
  return { status = "ignore" }
end

local eventType = tostring(at(event, setting("typePath", "type")) or "")
local tag = "event " .. msgId .. " (" .. eventType .. ")"
-- The provider's event id: the service applies each event once (a re-sent old event changes nothing).
local eventId = msgId
if type(eventId) ~= "string" or eventId == "" then eventId = nil end
local invoiceIdPath = setting("invoiceIdPath", "data.metadata.invoiceId")
local invoiceId = at(event, invoiceIdPath)
if type(invoiceId) == "number" then invoiceId = tostring(invoiceId) end
if type(invoiceId) ~= "string" or invoiceId == "" then invoiceId = nil end

local paidTypes = setOf(setting("paidTypes", "payment.succeeded,order.paid"))
local disputedTypes = setOf(setting("disputedTypes", "dispute.opened,dispute.created"))
if not paidTypes[eventType] and not disputedTypes[eventType] then
  log(tag .. ": event type not handled; ignored", "info")
  return { status = "ignore", invoiceId = invoiceId }
end

if invoiceId == nil then
  log(tag .. ": no invoice id at " .. invoiceIdPath .. "; ignored", "warning")
  return { status = "ignore" }
end
local invoice = getInvoice(invoiceId)
if invoice == nil then
  log(tag .. ": invoice " .. invoiceId .. " is not in this store; ignored", "warning")
  return { status = "ignore" }
end

if disputedTypes[eventType] then
  log(tag .. ": the provider reports a dispute", "warning")
  return { status = "disputeInvoice", invoiceId = invoiceId, eventId = eventId }
end

local currency = string.upper(tostring(at(event, setting("currencyPath", "data.currency")) or ""))
if currency ~= "USD" then
  log(tag .. ": paid in " .. (currency == "" and "an unknown currency" or currency) .. ", the invoice is in USD; not completed", "warning")
  return { status = "ignore", invoiceId = invoiceId }
end
local unit = setting("amountUnit", "cents") == "units" and "units" or "cents"
local paidCents = toCents(at(event, setting("amountPath", "data.total_amount")), unit)
local due = math.floor(invoice.totalInUsd * 100 + 0.5)
if paidCents == nil or paidCents < due then
  log(string.format("%s: underpaid, %s cents paid, %d cents due; not completed", tag, tostring(paidCents), due), "warning")
  return { status = "ignore", invoiceId = invoiceId }
end

log(string.format("%s: %d cents USD paid", tag, paidCents))
return { status = "pushInvoice", invoiceId = invoiceId, eventId = eventId }
