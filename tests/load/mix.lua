-- wrk script for tests/load/run.py: a seeded mix of requests on load.zarr.
--   40% node documents, 50% single 256x256 tiles, 10% 8 MiB volume regions
-- Each wrk thread has its own fixed seed.
local prefix = os.getenv("LOAD_PREFIX") or "/v1/datasets/load"
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
end

function init(args)
  math.randomseed(4242 + (id or 0))
end

local nodes = { "/nodes/", "/nodes/volume", "/nodes/tiles" }

function request()
  local r = math.random()
  if r < 0.4 then
    return wrk.format("GET", prefix .. nodes[math.random(1, #nodes)])
  elseif r < 0.9 then
    local row, col = math.random(0, 7), math.random(0, 7)
    return wrk.format("GET", string.format("%s/data/tiles?select=%d:%d,%d:%d", prefix,
                         row * 256, (row + 1) * 256, col * 256, (col + 1) * 256))
  else
    local z = math.random(0, 192)
    local yx = math.random(0, 256)
    return wrk.format("GET", string.format("%s/data/volume?select=%d:%d,%d:%d,%d:%d&format=binary", prefix,
                         z, z + 64, yx, yx + 256, yx, yx + 256))
  end
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'WRKJSON {"requests":%d,"duration_us":%d,"bytes":%d,' ..
    '"errors":{"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d},' ..
    '"latency_us":{"p50":%d,"p90":%d,"p99":%d,"max":%d}}\n',
    summary.requests, summary.duration, summary.bytes,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max))
end
