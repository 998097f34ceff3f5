-- paypal: PayPal REST webhooks, verified by PayPal's verify-webhook-signature API.
--
-- Install (storefront plugins install paypal --store ID --catalog paypal --secret K=V ...):
--   clientId          required  the REST app's client id      (Developer Dashboard -> Apps & Credentials)
--   clientSecret      required  the REST app's secret
--   webhookId         required  the id PayPal gave the webhook that points at this storefront
--   apiBase           optional  (default "https://api-m.paypal.com"; sandbox: "https://api-m.sandbox.paypal.com")
--   toleranceSeconds  optional  how far PAYPAL-TRANSMISSION-TIME may be from now; "0" turns the check
--                               off                                                   (default "300")
-- Create the order with purchase_units[].custom_id (or invoice_id) = the storefront invoice id.
--
-- Verification: every delivery costs two calls to PayPal (an OAuth2 client-credentials token, then
-- POST /v1/notifications/verify-webhook-signature with the PAYPAL-* transmission headers, the
-- webhook id and the event exactly as received). PayPal answering FAILURE is rejected (HTTP 401); PayPal
-- not answering, or refusing the credentials, fails the delivery (HTTP 500) so that PayPal retries it.
-- The operator must let fetch reach apiBase (it is public, so nothing to do unless it is overridden).
--
-- Events:
--   PAYMENT.CAPTURE.COMPLETED -> pushInvoice when resource.amount (USD) covers the invoice
--   CUSTOMER.DISPUTE.CREATED  -> disputeInvoice; the invoice id is the disputed transaction's custom
--                                (or invoice_number), else the custom_id of the capture fetched from
--                                GET /v2/payments/captures/{seller_transaction_id}
--   anything else             -> ignore
-- An underpayment, another currency, or an invoice that is not in this store is ignored with a
-- warning, never completed. A missing header, a stale transmission time or a signature PayPal does
-- not confirm is rejected (HTTP 401).

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

local function text(v)
  if type(v) == "string" and v ~= "" then return v end
  return nil
end

-- Micro-units of a decimal string such as "49.99", exactly (no floating point), or nil.
local function micros(value)
  if type(value) == "number" then return math.floor(value * 1000000 + 0.5) end
  if type(value) ~= "string" then return nil end
  local whole, frac = value:match("^%s*(%d+)%.?(%d*)%s*$")
  if whole == nil then return nil end
  frac = (frac .. "000000"):sub(1, 6)
  return tonumber(whole) * 1000000 + tonumber(frac)
end

-- Unix seconds of an RFC 3339 time such as "2024-01-31T12:00:00Z" (os.time with a table would use
-- the server's time zone).
local function unixTime(s)
  local y, mo, d, h, mi, sec, rest = tostring(s):match("^(%d%d%d%d)-(%d%d)-(%d%d)[Tt ](%d%d):(%d%d):(%d%d)(.*)$")
  if y == nil then return nil end
  rest = rest:gsub("^%.%d+", "")
  local offset = 0
  if rest ~= "Z" and rest ~= "z" then
    local sign, oh, om = rest:match("^([+-])(%d%d):?(%d%d)$")
    if sign == nil then return nil end
    offset = (tonumber(oh) * 3600 + tonumber(om) * 60) * (sign == "+" and 1 or -1)
  end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  -- Days since 1970-01-01 in the proleptic Gregorian calendar (Howard Hinnant's days_from_civil).
  if mo <= 2 then y = y - 1 end
  local era = y // 400
  local yoe = y - era * 400
  local doy = (153 * (mo + (mo > 2 and -3 or 9)) + 2) // 5 + d - 1
  local days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468
  return days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(sec) - offset
end

local clientId, clientSecret, webhookId = setting("clientId", nil), setting("clientSecret", nil), setting("webhookId", nil)
if clientId == nil or clientSecret == nil or webhookId == nil then
  error("paypal: the clientId, clientSecret and webhookId secrets must all be set")
end
local apiBase = string.gsub(setting("apiBase", "https://api-m.paypal.com"), "/+$", "")

---------------------------------------------------------------------------------------------------
-- Verification through PayPal
---------------------------------------------------------------------------------------------------

local h = request.headers
local transmission = {
  auth_algo = h["paypal-auth-algo"],
  cert_url = h["paypal-cert-url"],
  transmission_id = h["paypal-transmission-id"],
  transmission_sig = h["paypal-transmission-sig"],
  transmission_time = h["paypal-transmission-time"],
}
for _, name in ipairs({ "auth_algo", "cert_url", "transmission_id", "transmission_sig", "transmission_time" }) do
  if transmission[name] == nil or transmission[name] == "" then
    reject("missing PAYPAL-" .. string.upper((name:gsub("_", "-"))) .. " header")
  end
end

local tolerance = tonumber(setting("toleranceSeconds", "300")) or 300
if tolerance > 0 then
  local sent = unixTime(transmission.transmission_time)
  if sent == nil then reject("PAYPAL-TRANSMISSION-TIME is not an RFC 3339 time") end
  if math.abs(os.time() - sent) > tolerance then
    reject("PAYPAL-TRANSMISSION-TIME outside the tolerance of " .. tolerance .. " seconds")
  end
end

local event = request.json
if type(event) ~= "table" or field(event, "event_type") == nil then reject("body is not a PayPal webhook event") end

local function call(method, path, headers, body)
  local res, err = fetch(apiBase .. path, { method = method, headers = headers, body = body })
  if res == nil then error("paypal: PayPal API did not answer " .. method .. " " .. path .. " (" .. tostring(err) .. ")") end
  return res
end

local tokenRes = call("POST", "/v1/oauth2/token", {
  Authorization = "Basic " .. base64.encode(clientId .. ":" .. clientSecret),
  ["Content-Type"] = "application/x-www-form-urlencoded",
  Accept = "application/json",
}, "grant_type=client_credentials")
local token = tokenRes.ok and text(field(json.decode(tokenRes.body), "access_token"))
if not token then
  error("paypal: PayPal refused the OAuth2 token request (HTTP " .. tokenRes.status .. "); check clientId, clientSecret and apiBase")
end
local auth = { Authorization = "Bearer " .. token, ["Content-Type"] = "application/json", Accept = "application/json" }

-- The event goes to PayPal byte for byte: re-encoding it could change what PayPal checks.
local raw = request.body:gsub("^\239\187\191", "")
local verifyBody = "{"
for _, name in ipairs({ "auth_algo", "cert_url", "transmission_id", "transmission_sig", "transmission_time" }) do
  verifyBody = verifyBody .. json.encode(name) .. ":" .. json.encode(transmission[name]) .. ","
end
verifyBody = verifyBody .. '"webhook_id":' .. json.encode(webhookId) .. ',"webhook_event":' .. raw .. "}"

local verifyRes = call("POST", "/v1/notifications/verify-webhook-signature", auth, verifyBody)
if not verifyRes.ok then
  error("paypal: verify-webhook-signature answered HTTP " .. verifyRes.status)
end
local verdict = field(json.decode(verifyRes.body), "verification_status")
if verdict ~= "SUCCESS" then
  reject("PayPal did not confirm the signature (" .. tostring(verdict) .. ")")
end

---------------------------------------------------------------------------------------------------
-- The event
---------------------------------------------------------------------------------------------------

local eventType = tostring(field(event, "event_type"))
local resource = field(event, "resource")
if type(resource) ~= "table" then resource = {} end
local tag = "PayPal " .. tostring(field(event, "id") or "event") .. " (" .. eventType .. ")"
-- The provider's event id: the service applies each event once (a re-sent old event changes nothing).
local eventId = field(event, "id")
if type(eventId) ~= "string" or eventId == "" then eventId = nil end

if eventType == "PAYMENT.CAPTURE.COMPLETED" then
  local invoiceId = text(field(resource, "custom_id")) or text(field(resource, "invoice_id"))
  if invoiceId == nil then
    log(tag .. ": capture " .. tostring(field(resource, "id")) .. " has no custom_id or invoice_id; ignored", "info")
    return { status = "ignore" }
  end
  local invoice = getInvoice(invoiceId)
  if invoice == nil then
    log(tag .. ": invoice " .. invoiceId .. " is not in this store; ignored", "warning")
    return { status = "ignore" }
  end
  local status = field(resource, "status")
  if status ~= nil and status ~= "COMPLETED" then
    log(tag .. ": capture status is " .. tostring(status) .. "; not completed", "warning")
    return { status = "ignore", invoiceId = invoiceId }
  end
  local amount = field(resource, "amount")
  local currency = string.upper(tostring(field(amount, "currency_code") or ""))
  if currency ~= "USD" then
    log(tag .. ": paid in " .. currency .. ", the invoice is in USD; not completed", "warning")
    return { status = "ignore", invoiceId = invoiceId }
  end
  local paid = micros(field(amount, "value"))
  local due = math.floor(invoice.totalInUsd * 100 + 0.5) * 10000
  if paid == nil or paid < due then
    log(string.format("%s: underpaid, %s USD paid, %.2f USD due; not completed", tag, tostring(field(amount, "value")), due / 1000000), "warning")
    return { status = "ignore", invoiceId = invoiceId }
  end
  log(tag .. ": capture " .. tostring(field(resource, "id")) .. ", " .. tostring(field(amount, "value")) .. " USD paid")
  return { status = "pushInvoice", invoiceId = invoiceId, eventId = eventId }
end

if eventType == "CUSTOMER.DISPUTE.CREATED" then
  local invoiceId, source = nil, nil
  local transactions = field(resource, "disputed_transactions")
  if type(transactions) ~= "table" then transactions = {} end
  for _, t in ipairs(transactions) do
    invoiceId = invoiceId or text(field(t, "custom")) or text(field(t, "invoice_number"))
  end
  if invoiceId then source = "disputed transaction" end
  if invoiceId == nil then
    -- Look the capture up: its custom_id is what the checkout set.
    for _, t in ipairs(transactions) do
      local capture = text(field(t, "seller_transaction_id"))
      if invoiceId == nil and capture ~= nil then
        local res = call("GET", "/v2/payments/captures/" .. capture, auth, nil)
        if res.ok then
          local c = json.decode(res.body)
          invoiceId = text(field(c, "custom_id")) or text(field(c, "invoice_id"))
          source = "capture " .. capture
        elseif res.status ~= 404 then
          error("paypal: GET /v2/payments/captures/" .. capture .. " answered HTTP " .. res.status)
        end
      end
    end
  end
  if invoiceId == nil then
    log(tag .. ": dispute " .. tostring(field(resource, "dispute_id")) .. " cannot be matched to an invoice; ignored", "warning")
    return { status = "ignore" }
  end
  if getInvoice(invoiceId) == nil then
    log(tag .. ": invoice " .. invoiceId .. " is not in this store; ignored", "warning")
    return { status = "ignore" }
  end
  local amount = field(resource, "dispute_amount")
  log(string.format("%s: dispute %s (%s), %s %s, invoice found through the %s", tag, tostring(field(resource, "dispute_id")),
    tostring(field(resource, "reason")), tostring(field(amount, "value")), tostring(field(amount, "currency_code")), source), "warning")
  return { status = "disputeInvoice", invoiceId = invoiceId, eventId = eventId }
end

log(tag .. ": event type not handled; ignored", "info")
return { status = "ignore" }
