-- wrk script: cycles through a fixed tile list (bench/tiles_peer.py writes it), one
-- "z/row/col" a line, so every server sees the same tiles.
--   TILE_LIST   the list file
--   TILE_PREFIX path before "z/row/col", e.g. /v1/datasets/map/tiles/WebMercatorQuad/
--   TILE_QUERY  query string after it, e.g. ?variable=t2m&rescale=230,310
--   TILE_ENCODING  optional Accept-Encoding header, e.g. "gzip, deflate, br, zstd" (a browser's)
--   TILE_AUTH   optional Authorization header, e.g. "Bearer eyJ..." (bench/identity_tiles.py)
-- Thread N starts at a different place in the list (N-1 times a stride), then goes round.
-- Each response is checked: status 200 with a PNG signature counts as png_200, any
-- other status as non_200, a 200 without the signature as not_png (one WRKCHECK line).
local list_path = os.getenv("TILE_LIST")
local prefix = os.getenv("TILE_PREFIX") or "/"
local query = os.getenv("TILE_QUERY") or ""
local encoding = os.getenv("TILE_ENCODING")
local auth = os.getenv("TILE_AUTH")
local PNG_SIG = "\137PNG\r\n\26\n"

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

local reqs = {}
local pos = 1
png_200, non_200, not_png = 0, 0, 0

function init(args)
  for line in io.lines(list_path) do
    if #line > 0 then
      local headers = {}
      if encoding and #encoding > 0 then headers["Accept-Encoding"] = encoding end
      if auth and #auth > 0 then headers["Authorization"] = auth end
      reqs[#reqs + 1] = wrk.format("GET", prefix .. line .. query, headers)
    end
  end
  pos = (((id or 1) - 1) * 97) % #reqs + 1
end

function request()
  local r = reqs[pos]
  pos = pos % #reqs + 1
  return r
end

function response(status, headers, body)
  if status ~= 200 then
    non_200 = non_200 + 1
  elseif string.sub(body, 1, 8) ~= PNG_SIG then
    not_png = not_png + 1
  else
    png_200 = png_200 + 1
  end
end

dofile(os.getenv("WRK_DONE_LUA"))
local summary_done = done

function done(summary, latency, requests)
  summary_done(summary, latency, requests)
  local ok, bad, notpng = 0, 0, 0
  for _, t in ipairs(threads) do
    ok = ok + t:get("png_200")
    bad = bad + t:get("non_200")
    notpng = notpng + t:get("not_png")
  end
  io.write(string.format('WRKCHECK {"png_200":%d,"non_200":%d,"not_png":%d}\n', ok, bad, notpng))
end
