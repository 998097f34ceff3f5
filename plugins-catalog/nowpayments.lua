-- nowpayments: NOWPayments crypto payments, IPN callbacks signed with x-nowpayments-sig.
--
-- Install (storefront plugins install nowpayments --store ID --catalog nowpayments --secret K=V ...):
--   signingSecret  required  the IPN secret key (Dashboard -> Settings -> Payments -> Instant payment
--                            notifications)
-- Create the payment (or invoice) with order_id = the storefront invoice id, price_currency = "usd"
-- and ipn_callback_url = this storefront's /api/paymentPlugins?pluginName=...&storeId=... address.
--
-- Signature: x-nowpayments-sig is the HMAC-SHA512 hex, under the IPN secret, of the body re-encoded
-- the way NOWPayments' Node example does it: JSON.stringify of the object with its keys sorted
-- recursively (no spaces, JavaScript number formatting). Encodings that differ only in how arrays
-- and non-ASCII characters are written (NOWPayments' PHP example) are accepted too. The scheme has
-- no timestamp: a replayed callback is harmless because storefront applies a payment once.
--
-- payment_status:
--   finished        -> pushInvoice when price_currency is USD, price_amount covers the invoice and
--                      actually_paid is not below pay_amount
--   partially_paid  -> ignore with a warning on the invoice (never completed)
--   failed, expired, refunded -> ignore with a warning
--   waiting, confirming, confirmed, sending, anything else -> ignore with an info line
-- An invoice that is not in this store is ignored with a warning. A missing or wrong signature is
-- rejected (HTTP 401).

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

---------------------------------------------------------------------------------------------------
-- JSON.stringify, as JavaScript writes it, of a decoded value with object keys sorted.
---------------------------------------------------------------------------------------------------

-- Number.prototype.toString: the shortest digits that read back as the same double.
local function jsNumber(n)
  if math.type(n) == "integer" then
    if n > -9007199254740992 and n < 9007199254740992 then return string.format("%d", n) end
    n = n + 0.0
  end
  if n ~= n or n == math.huge or n == -math.huge then return "null" end
  if n == 0 then return "0" end
  local sign = ""
  if n < 0 then sign, n = "-", -n end
  local mantissa, exp
  for p = 1, 17 do
    local s = string.format("%." .. (p - 1) .. "e", n)
    if tonumber(s) == n or p == 17 then
      mantissa, exp = s:match("^([%d%.]+)e([-+]%d+)$")
      break
    end
  end
  local digits = mantissa:gsub("%.", ""):gsub("0+$", "")
  if digits == "" then digits = "0" end
  local k, e = #digits, tonumber(exp) + 1 -- value = 0.digits * 10^e
  if k <= e and e <= 21 then return sign .. digits .. string.rep("0", e - k) end
  if 0 < e and e <= 21 then return sign .. digits:sub(1, e) .. "." .. digits:sub(e + 1) end
  if -6 < e and e <= 0 then return sign .. "0." .. string.rep("0", -e) .. digits end
  local rest = k > 1 and ("." .. digits:sub(2)) or ""
  local x = e - 1
  return sign .. digits:sub(1, 1) .. rest .. "e" .. (x >= 0 and "+" or "-") .. math.abs(x)
end

local ESCAPES = { ['"'] = '\\"', ["\\"] = "\\\\", ["\b"] = "\\b", ["\f"] = "\\f", ["\n"] = "\\n", ["\r"] = "\\r", ["\t"] = "\\t" }

local function jsString(s, asciiOnly)
  s = s:gsub('[%z\1-\31"\\]', function(c) return ESCAPES[c] or string.format("\\u%04x", c:byte()) end)
  if asciiOnly then
    -- PHP's json_encode without JSON_UNESCAPED_UNICODE: \uXXXX (UTF-16) for everything past ASCII.
    s = s:gsub(utf8.charpattern, function(ch)
      local cp = utf8.codepoint(ch)
      if cp < 128 then return ch end
      if cp < 0x10000 then return string.format("\\u%04x", cp) end
      cp = cp - 0x10000
      return string.format("\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF))
    end)
  end
  return '"' .. s .. '"'
end

-- JavaScript enumerates array-index keys ("0", "7", "12") first, in numeric order, then the others
-- in insertion order, which sortObject makes the sorted order.
local function jsKeyOrder(a, b)
  local na = a:match("^0$") or a:match("^[1-9]%d*$")
  local nb = b:match("^0$") or b:match("^[1-9]%d*$")
  if na and tonumber(a) >= 4294967295 then na = nil end
  if nb and tonumber(b) >= 4294967295 then nb = nil end
  if na and nb then return tonumber(a) < tonumber(b) end
  if na or nb then return na ~= nil end
  return a < b
end

local function isArray(t)
  local mt = getmetatable(t)
  return type(mt) == "table" and mt.__jsontype == "array"
end

local stringify
stringify = function(v, opts)
  if v == nil or v == json.null then return "null" end
  local t = type(v)
  if t == "boolean" then return v and "true" or "false" end
  if t == "number" then return jsNumber(v) end
  if t == "string" then return jsString(v, opts.asciiOnly) end
  local parts = {}
  if isArray(v) and opts.keepArrays then
    for i = 1, #v do parts[i] = stringify(v[i], opts) end
    return "[" .. table.concat(parts, ",") .. "]"
  end
  -- NOWPayments' Node sortObject turns arrays into objects keyed "0", "1", ...
  local keys = {}
  if isArray(v) then
    for i = 1, #v do keys[i] = tostring(i - 1) end
  else
    for k in pairs(v) do keys[#keys + 1] = k end
  end
  table.sort(keys, jsKeyOrder)
  local array = isArray(v)
  for i, k in ipairs(keys) do
    local value
    if array then value = v[tonumber(k) + 1] else value = v[k] end
    parts[i] = jsString(k, opts.asciiOnly) .. ":" .. stringify(value, opts)
  end
  return "{" .. table.concat(parts, ",") .. "}"
end

---------------------------------------------------------------------------------------------------
-- Signature
---------------------------------------------------------------------------------------------------

local secret = setting("signingSecret", nil)
if secret == nil then
  error("nowpayments: the signingSecret secret is not set (the IPN secret key)")
end

local given = request.headers["x-nowpayments-sig"]
if given == nil or given == "" then reject("missing x-nowpayments-sig header") end
given = string.lower(given)

-- Decoded with nulls kept (as json.null): a null field is part of the signed text.
local ipn = json.decode(request.body, 1, json.null)
if type(ipn) ~= "table" or isArray(ipn) or ipn == json.null then reject("body is not a JSON object") end

local verified, tried = false, {}
local hasArrays = request.body:find("[", 1, true) ~= nil
local hasNonAscii = request.body:find("[\128-\255]") ~= nil
for _, opts in ipairs({
  { keepArrays = false, asciiOnly = false },
  { keepArrays = true, asciiOnly = false },
  { keepArrays = false, asciiOnly = true },
  { keepArrays = true, asciiOnly = true },
}) do
  if (hasArrays or not opts.keepArrays) and (hasNonAscii or not opts.asciiOnly) and not verified then
    local canonical = stringify(ipn, opts)
    if not tried[canonical] then
      tried[canonical] = true
      if timingSafeEqual(hmacShaSign(secret, canonical, "sha512"), given) then verified = true end
    end
  end
end
if not verified then reject("signature mismatch") end

---------------------------------------------------------------------------------------------------
-- The payment
---------------------------------------------------------------------------------------------------

local status = tostring(field(ipn, "payment_status") or "")
local invoiceId = field(ipn, "order_id")
if type(invoiceId) == "number" then invoiceId = jsNumber(invoiceId) end
if type(invoiceId) ~= "string" or invoiceId == "" then invoiceId = nil end
local tag = "NOWPayments payment " .. tostring(field(ipn, "payment_id")) .. " (" .. status .. ")"
-- NOWPayments sends one IPN per payment status, with no id of its own: payment and status name the event.
local eventId = field(ipn, "payment_id") ~= nil and (tostring(field(ipn, "payment_id")) .. ":" .. status) or nil

local function paidText()
  return string.format("%s of %s %s", tostring(field(ipn, "actually_paid")), tostring(field(ipn, "pay_amount")),
    string.upper(tostring(field(ipn, "pay_currency") or "")))
end

if status == "partially_paid" then
  log(tag .. ": partially paid, " .. paidText() .. "; not completed", "warning")
  return { status = "ignore", invoiceId = invoiceId }
elseif status == "failed" or status == "expired" or status == "refunded" then
  log(tag .. ": payment " .. status .. "; not completed", "warning")
  return { status = "ignore", invoiceId = invoiceId }
elseif status ~= "finished" then
  log(tag .. ": not final yet; ignored", "info")
  return { status = "ignore", invoiceId = invoiceId }
end

if invoiceId == nil then
  log(tag .. ": no order_id; ignored", "warning")
  return { status = "ignore" }
end
local invoice = getInvoice(invoiceId)
if invoice == nil then
  log(tag .. ": invoice " .. invoiceId .. " is not in this store; ignored", "warning")
  return { status = "ignore" }
end

local currency = string.upper(tostring(field(ipn, "price_currency") or ""))
if currency ~= "USD" then
  log(tag .. ": priced in " .. currency .. ", the invoice is in USD; not completed", "warning")
  return { status = "ignore", invoiceId = invoiceId }
end
local priced = tonumber(field(ipn, "price_amount"))
local due = math.floor(invoice.totalInUsd * 100 + 0.5)
if priced == nil or math.floor(priced * 100 + 0.5) < due then
  log(string.format("%s: underpaid, priced at %s USD, %.2f USD due; not completed", tag, tostring(priced), due / 100), "warning")
  return { status = "ignore", invoiceId = invoiceId }
end
local actually, expected = tonumber(field(ipn, "actually_paid")), tonumber(field(ipn, "pay_amount"))
if actually ~= nil and expected ~= nil and actually < expected then
  log(tag .. ": underpaid, " .. paidText() .. "; not completed", "warning")
  return { status = "ignore", invoiceId = invoiceId }
end

log(string.format("%s: %s USD paid (%s)", tag, jsNumber(priced), paidText()))
return { status = "pushInvoice", invoiceId = invoiceId, eventId = eventId }
