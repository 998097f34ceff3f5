-- stripe: Stripe webhooks (Stripe-Signature), Checkout Sessions and PaymentIntents, disputes.
--
-- Install (storefront plugins install stripe --store ID --catalog stripe --secret K=V ...):
--   signingSecret       required  the endpoint's signing secret from the Stripe dashboard ("whsec_...")
--   toleranceSeconds    optional  how far the signed timestamp may be from now        (default "300")
--   stripeApiKey        optional  a restricted key ("rk_...") with read access to PaymentIntents and
--                                 Charges; lets a dispute be traced back to its invoice through the
--                                 Stripe API when the dispute itself carries no invoice id
--   stripeApiBase       optional  (default "https://api.stripe.com")
--   invoiceIdMetadataKey optional metadata key holding the storefront invoice id   (default "invoiceId")
--
-- At checkout, put the storefront invoice id in the Checkout Session's client_reference_id (or
-- metadata.invoiceId) and in payment_intent_data.metadata.invoiceId, so that payments and disputes
-- can both be matched to it.
--
-- Events:
--   checkout.session.completed, checkout.session.async_payment_succeeded
--       -> pushInvoice when payment_status is "paid" and amount_total/currency cover the invoice
--   payment_intent.succeeded -> pushInvoice when amount_received/currency cover the invoice
--   charge.dispute.created   -> disputeInvoice (invoice id from the dispute's metadata, else from the
--                               PaymentIntent fetched with stripeApiKey)
--   anything else            -> ignore
-- An amount below the invoice total, another currency than USD, or an invoice that is not in this
-- store is ignored with a warning: the invoice is never completed by it.
-- A missing or wrong signature, or a timestamp outside the tolerance, is rejected (HTTP 401).

local function setting(name, default)
  local v = secrets[name]
  if v == nil or v == "" then return default end
  return v
end

-- A non-empty string, or nil (JSON null decodes to json.null, a table).
local function text(v)
  if type(v) == "string" and v ~= "" then return v end
  if type(v) == "number" then return tostring(v) end
  return nil
end

local function field(tbl, key)
  if type(tbl) ~= "table" then return nil end
  local v = tbl[key]
  if v == json.null then return nil end
  return v
end

-- Whole cents of a number of dollars (floats such as 49.99 are not exact).
local function dollarsToCents(amount)
  return math.floor(amount * 100 + 0.5)
end

---------------------------------------------------------------------------------------------------
-- Signature: Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>...][,v0=...]
-- v1 = HMAC-SHA256 hex of "<t>.<raw body>" under the signing secret. While a secret is being rolled,
-- Stripe sends one v1 per active secret: any one matching is enough.
---------------------------------------------------------------------------------------------------

local secret = setting("signingSecret", nil)
if secret == nil then
  error("stripe: the signingSecret secret is not set (install with --secret signingSecret=whsec_...)")
end

local header = request.headers["stripe-signature"]
if header == nil or header == "" then reject("missing Stripe-Signature header") end

local timestamp, candidates = nil, {}
for item in string.gmatch(header, "[^,]+") do
  local key, value = item:match("^%s*([%w_]+)=(.-)%s*$")
  if key == "t" and timestamp == nil then
    timestamp = value
  elseif key == "v1" then
    candidates[#candidates + 1] = string.lower(value)
  end
end
if timestamp == nil or not timestamp:match("^%d+$") then reject("Stripe-Signature has no valid timestamp") end
if #candidates == 0 then reject("Stripe-Signature has no v1 signature") end

local tolerance = tonumber(setting("toleranceSeconds", "300")) or 300
if tolerance > 0 and math.abs(os.time() - tonumber(timestamp)) > tolerance then
  reject("timestamp outside the tolerance of " .. tolerance .. " seconds")
end

local expected = hmacShaSign(secret, timestamp .. "." .. request.body, "sha256")
local verified = false
for _, candidate in ipairs(candidates) do
  if timingSafeEqual(expected, candidate) then verified = true end
end
if not verified then reject("no v1 signature matches the payload") end

---------------------------------------------------------------------------------------------------
-- The event
---------------------------------------------------------------------------------------------------

local event = request.json
if type(event) ~= "table" or type(field(event, "data")) ~= "table" then
  log("signed body is not a Stripe event; ignored", "warning")
  return { status = "ignore" }
end
local eventType = tostring(field(event, "type") or "")
local object = field(event.data, "object")
if type(object) ~= "table" then object = {} end
local metadataKey = setting("invoiceIdMetadataKey", "invoiceId")
local tag = "Stripe " .. tostring(field(event, "id") or "event") .. " (" .. eventType .. ")"
-- The provider's event id: the service applies each event once (a re-sent old event changes nothing).
local eventId = field(event, "id")
if type(eventId) ~= "string" or eventId == "" then eventId = nil end

-- Completes the invoice only when the amount and currency cover it.
local function paid(invoiceId, amountCents, currency)
  if invoiceId == nil then
    log(tag .. ": no storefront invoice id (client_reference_id or metadata." .. metadataKey .. "); ignored", "info")
    return { status = "ignore" }
  end
  local invoice = getInvoice(invoiceId)
  if invoice == nil then
    log(tag .. ": invoice " .. invoiceId .. " is not in this store; ignored", "warning")
    return { status = "ignore" }
  end
  currency = string.upper(tostring(currency or ""))
  if currency ~= "USD" then
    log(tag .. ": paid in " .. currency .. ", the invoice is in USD; not completed", "warning")
    return { status = "ignore", invoiceId = invoiceId }
  end
  local due = dollarsToCents(invoice.totalInUsd)
  amountCents = tonumber(amountCents)
  if amountCents == nil or amountCents < due then
    log(string.format("%s: underpaid, %s cents paid, %d cents due; not completed", tag, tostring(amountCents), due), "warning")
    return { status = "ignore", invoiceId = invoiceId }
  end
  log(string.format("%s: %d cents USD paid", tag, amountCents))
  return { status = "pushInvoice", invoiceId = invoiceId, eventId = eventId }
end

-- GET on the Stripe API with the restricted key; the decoded object, or nil and why not.
local function stripeGet(path)
  local key = setting("stripeApiKey", nil)
  if key == nil then return nil, "no stripeApiKey secret" end
  local base = string.gsub(setting("stripeApiBase", "https://api.stripe.com"), "/+$", "")
  local res, err = fetch(base .. path, { headers = { Authorization = "Bearer " .. key } })
  if res == nil then
    -- No answer: fail the delivery so that Stripe retries it.
    error("stripe: the Stripe API did not answer (" .. tostring(err) .. ")")
  end
  if res.status == 404 then return nil, "Stripe API has no " .. path end
  if not res.ok then
    -- A wrong key or a Stripe outage: fail the delivery so that Stripe retries it once fixed.
    error("stripe: the Stripe API answered HTTP " .. res.status .. " for " .. path)
  end
  local decoded = json.decode(res.body)
  if type(decoded) ~= "table" then return nil, "Stripe API answer is not JSON" end
  return decoded
end

-- A dispute names its charge and (usually) its PaymentIntent; disputes have their own metadata,
-- which Stripe does not copy from the payment.
local function disputedInvoiceId(dispute)
  local id = text(field(field(dispute, "metadata"), metadataKey))
  if id then return id, "dispute metadata" end
  local intent = field(dispute, "payment_intent")
  if type(intent) == "table" then
    id = text(field(field(intent, "metadata"), metadataKey))
    if id then return id, "expanded payment intent" end
    intent = field(intent, "id")
  end
  intent = text(intent)
  if intent == nil then
    local charge = text(field(dispute, "charge"))
    if charge ~= nil then
      local c, why = stripeGet("/v1/charges/" .. charge)
      if c == nil then return nil, why end
      id = text(field(field(c, "metadata"), metadataKey))
      if id then return id, "charge " .. charge end
      intent = text(field(c, "payment_intent"))
    end
  end
  if intent == nil then return nil, "the dispute names no payment intent" end
  local pi, why = stripeGet("/v1/payment_intents/" .. intent)
  if pi == nil then return nil, why end
  id = text(field(field(pi, "metadata"), metadataKey))
  if id then return id, "payment intent " .. intent end
  return nil, "payment intent " .. intent .. " has no metadata." .. metadataKey
end

if eventType == "checkout.session.completed" or eventType == "checkout.session.async_payment_succeeded" then
  local invoiceId = text(field(object, "client_reference_id")) or text(field(field(object, "metadata"), metadataKey))
  local paymentStatus = tostring(field(object, "payment_status") or "")
  if paymentStatus ~= "paid" then
    log(tag .. ": payment_status is " .. paymentStatus .. ", not paid yet; waiting for checkout.session.async_payment_succeeded", "info")
    return { status = "ignore", invoiceId = invoiceId }
  end
  return paid(invoiceId, field(object, "amount_total"), field(object, "currency"))
elseif eventType == "payment_intent.succeeded" then
  local invoiceId = text(field(field(object, "metadata"), metadataKey))
  return paid(invoiceId, field(object, "amount_received"), field(object, "currency"))
elseif eventType == "charge.dispute.created" then
  local invoiceId, source = disputedInvoiceId(object)
  if invoiceId == nil then
    log(tag .. ": dispute " .. tostring(field(object, "id")) .. " cannot be matched to an invoice (" .. tostring(source) .. "); ignored", "warning")
    return { status = "ignore" }
  end
  if getInvoice(invoiceId) == nil then
    log(tag .. ": invoice " .. invoiceId .. " is not in this store; ignored", "warning")
    return { status = "ignore" }
  end
  log(string.format("%s: dispute %s (%s), %s cents %s, invoice found through the %s", tag, tostring(field(object, "id")),
    tostring(field(object, "reason")), tostring(field(object, "amount")), string.upper(tostring(field(object, "currency") or "")), source), "warning")
  return { status = "disputeInvoice", invoiceId = invoiceId, eventId = eventId }
end

log(tag .. ": event type not handled; ignored", "info")
return { status = "ignore" }
