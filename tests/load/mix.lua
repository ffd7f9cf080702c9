-- wrk script for tests/load/run.py: a seeded mix of requests on load.zarr.
--   35% node documents, 45% single 256x256 tiles, 10% 8 MiB volume regions,
--   10% JSON of 128x128 volume regions (streamed text)
-- Each wrk thread has its own fixed seed, offset by LOAD_SEED (run.py's warm-up
-- rounds each take another).
local prefix = os.getenv("LOAD_PREFIX") or "/v1/datasets/load"
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
end

function init(args)
  math.randomseed(tonumber(os.getenv("LOAD_SEED") or "4242") + (id or 0))
end

local nodes = { "/nodes/", "/nodes/volume", "/nodes/tiles" }

function request()
  local r = math.random()
  if r < 0.35 then
    return wrk.format("GET", prefix .. nodes[math.random(1, #nodes)])
  elseif r < 0.8 then
    local row, col = math.random(0, 7), math.random(0, 7)
    return wrk.format("GET", string.format("%s/data/tiles?select=%d:%d,%d:%d", prefix,
                         row * 256, (row + 1) * 256, col * 256, (col + 1) * 256))
  elseif r < 0.9 then
    local z, y, x = math.random(0, 255), math.random(0, 384), math.random(0, 384)
    return wrk.format("GET", string.format("%s/data/volume?select=%d:%d,%d:%d,%d:%d&format=json", prefix,
                         z, z + 2, y, y + 128, x, x + 128))
  else
    local z = math.random(0, 192)
    local yx = math.random(0, 256)
    return wrk.format("GET", string.format("%s/data/volume?select=%d:%d,%d:%d,%d:%d&format=binary", prefix,
                         z, z + 64, yx, yx + 256, yx, yx + 256))
  end
end

-- The summary line run.py reads (shared with the benchmark's wrk scripts).
dofile(os.getenv("WRK_DONE_LUA"))
