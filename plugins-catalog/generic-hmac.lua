-- generic-hmac: any provider that signs the raw body with an HMAC in a header.
--
-- Configure it with secrets (storefront plugins install NAME --catalog generic-hmac --secret K=V ...):
--   signingSecret     required  the provider's webhook signing secret
--   signatureHeader   optional  header carrying the signature            (default "x-signature")
--   algorithm         optional  sha1 | sha256 | sha384 | sha512          (default "sha256")
--   encoding          optional  hex | base64                             (default "hex")
--   signaturePrefix   optional  text before the signature, e.g. "sha256=" (default "")
--   timestampHeader   optional  when set, the signed data is "<timestamp>.<body>" and the
--                               timestamp (unix seconds) must be within toleranceSeconds
--   toleranceSeconds  optional  (default "300")
--   invoiceIdPath     optional  dotted path of the invoice id in the JSON body (default "invoiceId")
--   statusPath        optional  dotted path of the payment status            (default "status")
--   paidValues        optional  comma list of statuses that mean paid        (default "paid,completed,succeeded")
--   disputedValues    optional  comma list meaning disputed                  (default "disputed,chargeback")
--   amountPath        optional  dotted path of the amount paid in US dollars; when set, an amount
--                               below the invoice total is ignored with a warning, never completed
--   currencyPath      optional  dotted path of the currency; when set it must be USD
--   eventIdPath       optional  dotted path of the provider's event id      (default "id"); the
--                               service applies each event once. Without one in the body, the
--                               event is known by the SHA-256 of the body.
--
-- Result: paid -> pushInvoice, disputed -> disputeInvoice, anything else -> ignore.
-- A missing or wrong signature, or a stale timestamp, is rejected (HTTP 401 to the provider).

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

local function set_of(list)
  local out = {}
  for item in string.gmatch(list, "[^,]+") do out[(item:gsub("^%s+", ""):gsub("%s+$", ""))] = true end
  return out
end

local secret = setting("signingSecret", nil)
if secret == nil then
  error("generic-hmac: the signingSecret secret is not set")
end

local header = string.lower(setting("signatureHeader", "x-signature"))
local given = request.headers[header]
if given == nil or given == "" then
  reject("missing " .. header .. " header")
end

local prefix = setting("signaturePrefix", "")
if prefix ~= "" then
  if given:sub(1, #prefix) ~= prefix then reject("signature does not start with " .. prefix) end
  given = given:sub(#prefix + 1)
end

local signed = request.body
local tsHeader = setting("timestampHeader", nil)
if tsHeader ~= nil then
  local ts = tonumber(request.headers[string.lower(tsHeader)] or "")
  if ts == nil then reject("missing or invalid " .. tsHeader .. " header") end
  local tolerance = tonumber(setting("toleranceSeconds", "300")) or 300
  if math.abs(os.time() - ts) > tolerance then reject("timestamp outside the tolerance") end
  signed = tostring(math.floor(ts)) .. "." .. request.body
end

local encoding = setting("encoding", "hex")
local expected = hmacShaSign(secret, signed, setting("algorithm", "sha256"), encoding == "base64" and "base64" or nil)
if encoding ~= "base64" then given = string.lower(given) end
if not timingSafeEqual(expected, given) then
  reject("signature mismatch")
end

local event = request.json
if type(event) ~= "table" then
  log("body is not a JSON object; ignored", "warning")
  return { status = "ignore" }
end

local invoiceId = at(event, setting("invoiceIdPath", "invoiceId"))
local status = at(event, setting("statusPath", "status"))
if type(invoiceId) ~= "string" or invoiceId == "" then
  log("no invoice id at " .. setting("invoiceIdPath", "invoiceId") .. "; ignored", "info")
  return { status = "ignore" }
end
status = tostring(status or "")
local eventId = at(event, setting("eventIdPath", "id"))
if math.type(eventId) == "integer" then eventId = tostring(eventId) end
if type(eventId) ~= "string" or eventId == "" then eventId = nil end

if set_of(setting("disputedValues", "disputed,chargeback"))[status] then
  log("provider reports a dispute (" .. status .. ")", "warning")
  return { status = "disputeInvoice", invoiceId = invoiceId, eventId = eventId }
end

if not set_of(setting("paidValues", "paid,completed,succeeded"))[status] then
  log("payment status " .. status .. " is not final; ignored", "info")
  return { status = "ignore", invoiceId = invoiceId }
end

local amountPath = setting("amountPath", nil)
if amountPath ~= nil then
  local invoice = getInvoice(invoiceId)
  if invoice == nil then
    log("invoice " .. invoiceId .. " is not in this store; ignored", "warning")
    return { status = "ignore" }
  end
  local currencyPath = setting("currencyPath", nil)
  if currencyPath ~= nil then
    local currency = string.upper(tostring(at(event, currencyPath) or ""))
    if currency ~= "USD" then
      log("paid in " .. currency .. ", expected USD; ignored", "warning")
      return { status = "ignore", invoiceId = invoiceId }
    end
  end
  local paid = tonumber(at(event, amountPath))
  -- Compare in cents to avoid float rounding.
  if paid == nil or math.floor(paid * 100 + 0.5) < math.floor(invoice.totalInUsd * 100 + 0.5) then
    log(string.format("underpaid: %s paid, %.2f due; not completed", tostring(paid), invoice.totalInUsd), "warning")
    return { status = "ignore", invoiceId = invoiceId }
  end
end

log("payment " .. status .. " verified", "info")
return { status = "pushInvoice", invoiceId = invoiceId, eventId = eventId }
