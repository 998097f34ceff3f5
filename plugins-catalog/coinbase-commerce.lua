-- coinbase-commerce: Coinbase Commerce charges (X-CC-Webhook-Signature).
--
-- Install (storefront plugins install coinbase --store ID --catalog coinbase-commerce --secret K=V ...):
--   signingSecret         required  the webhook subscription's shared secret (Settings -> Webhook subscriptions)
--   invoiceIdMetadataKey  optional  key of the charge's metadata holding the storefront invoice id
--                                   (default "invoiceId"; create the charge with metadata.invoiceId)
--
-- Signature: X-CC-Webhook-Signature is the HMAC-SHA256 hex of the raw body under the shared secret.
-- The scheme has no timestamp: a replayed delivery is harmless because storefront applies a
-- payment to an invoice once.
--
-- Events (the body is {"id", "scheduled_for" | "attempt_number", "event": {"type", "data": <charge>}}):
--   charge:confirmed, charge:resolved -> pushInvoice when the amount paid (the confirmed payments'
--                                        local amounts, else the charge's pricing.local) in USD covers
--                                        the invoice
--   charge:failed (expired, underpaid, or cancelled) -> ignore with a warning on the invoice
--   charge:created, charge:pending, charge:delayed, anything else -> ignore with an info line
-- An underpayment or an invoice that is not in this store is ignored with a warning, never completed.
-- A missing or wrong signature is rejected (HTTP 401).

local function setting(name, default)
  local v = secrets[name]
  if v == nil or v == "" then return default end
  return v
end

local function field(tbl, key)
  if type(tbl) ~= "table" then return nil end
  local v = tbl[key]
  if v == json.null then return nil end
  return v
end

-- Micro-dollars of a decimal string such as "49.99" (exact: no floating point), or nil.
local function micros(value)
  if type(value) == "number" then return math.floor(value * 1000000 + 0.5) end
  if type(value) ~= "string" then return nil end
  local whole, frac = value:match("^%s*(%d+)%.?(%d*)%s*$")
  if whole == nil then return nil end
  frac = (frac .. "000000"):sub(1, 6)
  return tonumber(whole) * 1000000 + tonumber(frac)
end

local function money(m)
  return (string.format("%d.%06d", m // 1000000, m % 1000000):gsub("0000$", ""))
end

local secret = setting("signingSecret", nil)
if secret == nil then
  error("coinbase-commerce: the signingSecret secret is not set (the webhook shared secret)")
end

local given = request.headers["x-cc-webhook-signature"]
if given == nil or given == "" then reject("missing X-CC-Webhook-Signature header") end
if not timingSafeEqual(hmacShaSign(secret, request.body, "sha256"), string.lower(given)) then
  reject("signature mismatch")
end

local body = request.json
local event = field(body, "event")
if type(event) ~= "table" then
  log("signed body has no event; ignored", "warning")
  return { status = "ignore" }
end
local eventType = tostring(field(event, "type") or "")
local charge = field(event, "data")
if type(charge) ~= "table" then charge = {} end
local metadataKey = setting("invoiceIdMetadataKey", "invoiceId")
local invoiceId = field(field(charge, "metadata"), metadataKey)
if type(invoiceId) ~= "string" or invoiceId == "" then invoiceId = nil end
local tag = "Coinbase " .. tostring(field(event, "id") or "event") .. " (" .. eventType .. ", charge " .. tostring(field(charge, "code")) .. ")"
-- The provider's event id: the service applies each event once (a re-sent old event changes nothing).
local eventId = field(event, "id")
if type(eventId) ~= "string" or eventId == "" then eventId = nil end

if eventType == "charge:failed" then
  log(tag .. ": the charge failed (expired, underpaid or cancelled); invoice not completed", "warning")
  return { status = "ignore", invoiceId = invoiceId }
end
if eventType ~= "charge:confirmed" and eventType ~= "charge:resolved" then
  log(tag .. ": not a final payment; ignored", "info")
  return { status = "ignore", invoiceId = invoiceId }
end

if invoiceId == nil then
  log(tag .. ": no metadata." .. metadataKey .. " on the charge; ignored", "warning")
  return { status = "ignore" }
end
local invoice = getInvoice(invoiceId)
if invoice == nil then
  log(tag .. ": invoice " .. invoiceId .. " is not in this store; ignored", "warning")
  return { status = "ignore" }
end

-- What was paid, in the charge's local (fiat) currency: the confirmed payments of the classic API,
-- or, for onchain charges (no payments list), the charge price that "confirmed" means was paid in full.
local paid, currency = nil, nil
local payments = field(charge, "payments")
if type(payments) == "table" and #payments > 0 then
  paid = 0
  for _, p in ipairs(payments) do
    local status = string.upper(tostring(field(p, "status") or ""))
    local localValue = field(field(p, "value"), "local")
    if status == "CONFIRMED" and type(localValue) == "table" then
      local c = string.upper(tostring(field(localValue, "currency") or ""))
      if currency ~= nil and currency ~= c then currency = "mixed currencies" else currency = c end
      paid = paid + (micros(field(localValue, "amount")) or 0)
    end
  end
else
  local pricing = field(field(charge, "pricing"), "local")
  paid = micros(field(pricing, "amount"))
  currency = string.upper(tostring(field(pricing, "currency") or ""))
end

if currency ~= "USD" then
  log(tag .. ": paid in " .. tostring(currency or "no currency") .. ", the invoice is in USD; not completed", "warning")
  return { status = "ignore", invoiceId = invoiceId }
end
local due = math.floor(invoice.totalInUsd * 100 + 0.5) * 10000
if paid == nil or paid < due then
  log(string.format("%s: underpaid, %s USD paid, %s USD due; not completed", tag, paid and money(paid) or "nothing", money(due)), "warning")
  return { status = "ignore", invoiceId = invoiceId }
end

log(tag .. ": " .. money(paid) .. " USD paid")
return { status = "pushInvoice", invoiceId = invoiceId, eventId = eventId }
