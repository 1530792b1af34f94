-- wrk script for scripts/webhook-load.sh: the mixed AdmissionReview load.
--
-- Env: BODIES (dir of <class>.body from reviews.py), QUOTA (answers per wrk thread, then
-- the thread stops and creates OUT.done-*), OUT (file the per-class tallies go to).
--
-- Every request is picked from a fixed 1000-slot cycle (weights below). Every answer is
-- classified: 200 answers by the class prefix of the echoed uid and "allowed", others by
-- HTTP status. Answers and requests are counted per thread and merged in done().

local weights = {
  {"ok", 560}, {"mut", 100}, {"miss", 150}, {"unk", 80}, {"huge", 5},
  {"bad-truncated", 13}, {"bad-garbage", 13}, {"bad-empty", 12}, {"bad-wrongtype", 12},
  {"bad-deep", 12}, {"bad-trailing", 13}, {"bad-number", 12}, {"bad-utf8", 13},
  {"big", 5},
}

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

local reqs, cycle = {}, {}
local n, answered, quota = 0, 0, 0
sent, got = {}, {}

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

function init(args)
  local dir = os.getenv("BODIES")
  quota = tonumber(os.getenv("QUOTA") or "0")
  local json = {["Content-Type"] = "application/json"}
  for _, w in ipairs(weights) do
    local class = w[1]
    if class == "big" then
      -- Declares a body above the 3 MiB limit and sends none of it: only an answer given
      -- before reading the body (413) gets this one back; a server that waits for the
      -- body hangs and wrk counts a timeout.
      reqs[class] = "POST /validate HTTP/1.1\r\nHost: " .. wrk.headers["Host"] ..
        "\r\nContent-Type: application/json\r\nContent-Length: " .. (3 * 1024 * 1024 + 1) ..
        "\r\nConnection: close\r\n\r\n"
    else
      local path = (class == "mut") and "/mutate" or "/validate"
      reqs[class] = wrk.format("POST", path, json, read(dir .. "/" .. class .. ".body"))
    end
    for _ = 1, w[2] do table.insert(cycle, class) end
  end
  assert(#cycle == 1000, "weights must add up to 1000, not " .. #cycle)
end

function request()
  n = n + 1
  local class = cycle[(n % 1000) + 1]
  sent[class] = (sent[class] or 0) + 1
  return reqs[class]
end

function response(status, headers, body)
  local key
  if status == 200 then
    local class = body:match('"uid":"(%a+)%-') or "?"
    local verdict = body:find('"allowed":true', 1, true) and "allowed" or "denied"
    key = class .. " " .. verdict
  else
    key = "http " .. status
  end
  got[key] = (got[key] or 0) + 1
  answered = answered + 1
  if quota > 0 and answered == quota then
    -- Stop this thread and tell the script, which interrupts wrk's timer (SIGINT) so the
    -- run ends after exactly QUOTA answers per thread instead of at -d.
    wrk.thread:stop()
    local f = io.open(os.getenv("OUT") .. ".done-" .. tostring({}):match("0x(%x+)"), "w")
    if f then f:close() end
  end
end

local function add(into, t)
  for k, v in pairs(t) do into[k] = (into[k] or 0) + v end
end

function done(summary, latency, requests)
  local s, g = {}, {}
  for _, t in ipairs(threads) do
    add(s, t:get("sent"))
    add(g, t:get("got"))
  end
  local f = assert(io.open(os.getenv("OUT"), "w"))
  for k, v in pairs(s) do f:write(string.format("sent %s %d\n", k, v)) end
  for k, v in pairs(g) do f:write(string.format("got %s %d\n", k, v)) end
  local e = summary.errors
  f:write(string.format("errors connect=%d read=%d write=%d timeout=%d\n",
    e.connect, e.read, e.write, e.timeout))
  f:write(string.format("requests %d\nseconds %.3f\n", summary.requests, summary.duration / 1e6))
  for _, p in ipairs({50, 90, 99, 99.9}) do
    f:write(string.format("p%s_ms %.3f\n", p, latency:percentile(p) / 1000))
  end
  f:write(string.format("max_ms %.3f\nmean_ms %.3f\n", latency.max / 1000, latency.mean / 1000))
  f:close()
end
