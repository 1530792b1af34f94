-- wrk script for scripts/webhook-load.sh: uncached admissions while the registry is stopped.
--
-- Env: BODIES (dir from reviews.py), REG (registry HOST:PORT), TAGS (how many present tags
-- demo/hello:t1..tN there are), OUT (tally file).
--
-- Odd requests ask for a present tag (the webhook runs with a near-zero positive TTL, so
-- each is a registry lookup), even ones for a distinct absent tag (a lookup too). Answers:
--   verified-allowed    allowed, no "not verified" warning (registry answered: pullable)
--   verified-denied     denied with not_found (registry answered)
--   unverified-allowed  allowed with a "not verified, admitted" warning (fail-open)
--   unverified-denied   denied as transient (fail-closed)
local threads = {}
function setup(thread) table.insert(threads, thread) end

local tpl, reg, tags
local n = 0
got = {}

function init(args)
  local f = assert(io.open(os.getenv("BODIES") .. "/outage-template.body", "rb"))
  tpl = f:read("*a"); f:close()
  reg = os.getenv("REG")
  tags = tonumber(os.getenv("TAGS"))
  math.randomseed(os.time() + tonumber(tostring({}):match("0x(%x+)"), 16) % 1000)
  n = math.random(1, 1e9)
end

function request()
  n = n + 1
  local image
  if n % 2 == 1 then
    image = string.format("%s/demo/hello:t%d", reg, n % tags + 1)
  else
    image = string.format("%s/demo/hello:gone-%d", reg, n)
  end
  local body = tpl:gsub("__IMAGE__", image)
  return wrk.format("POST", "/validate", {["Content-Type"] = "application/json"}, body)
end

function response(status, headers, body)
  local key
  if status ~= 200 then
    key = "http-" .. status
  elseif body:find('"allowed":true', 1, true) then
    key = body:find("not verified, admitted", 1, true) and "unverified-allowed" or "verified-allowed"
  elseif body:find(": transient (", 1, true) then
    key = "unverified-denied"
  elseif body:find(": not_found (", 1, true) then
    key = "verified-denied"
  else
    key = "other-denied"
  end
  got[key] = (got[key] or 0) + 1
end

function done(summary, latency, requests)
  local g = {}
  for _, t in ipairs(threads) do
    for k, v in pairs(t:get("got")) do g[k] = (g[k] or 0) + v end
  end
  local f = assert(io.open(os.getenv("OUT"), "w"))
  for k, v in pairs(g) do f:write(string.format("got %s %d\n", k, v)) end
  local e = summary.errors
  f:write(string.format("errors connect=%d read=%d write=%d timeout=%d\n",
    e.connect, e.read, e.write, e.timeout))
  f:write(string.format("requests %d\nseconds %.3f\n", summary.requests, summary.duration / 1e6))
  for _, p in ipairs({50, 99}) do
    f:write(string.format("p%s_ms %.3f\n", p, latency:percentile(p) / 1000))
  end
  f:write(string.format("max_ms %.3f\n", latency.max / 1000))
  f:close()
end
