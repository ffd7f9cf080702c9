-- wrk script: random single inner-chunk tiles of bench/tiles (32 x 32 grid of 256x256).
-- TILE_MODE=zarr   -> /v1/datasets/bench/data/tiles?select=R*256:(R+1)*256,C*256:(C+1)*256
-- TILE_MODE=v2     -> /v1/datasets/bench/v2/tiles/R.C   (the Zarr v2 view's chunk, same bytes)
-- TILE_MODE=png    -> the zarr tile drawn as a 256x256 PNG (viridis, default rescale)
-- TILE_MODE=static -> /static/tiles/R_C.bin   (nginx, same bytes)
-- Each wrk thread uses a fixed seed, so both servers see the same request sequence.
local mode = os.getenv("TILE_MODE") or "zarr"
-- TILE_ENCODING=zstd asks for that Content-Encoding, as a browser would.
local encoding = os.getenv("TILE_ENCODING")
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
end

function init(args)
  math.randomseed(1000 + (id or 0))
end

function request()
  local r = math.random(0, 31)
  local c = math.random(0, 31)
  local path
  if mode == "static" then
    path = "/static/tiles/" .. r .. "_" .. c .. ".bin"
  elseif mode == "v2" then
    path = "/v1/datasets/bench/v2/tiles/" .. r .. "." .. c
  else
    path = string.format("/v1/datasets/bench/data/tiles?select=%d:%d,%d:%d",
                         r * 256, (r + 1) * 256, c * 256, (c + 1) * 256)
    if mode == "png" then
      path = path .. "&format=png&colormap=viridis"
    end
  end
  if encoding then
    return wrk.format("GET", path, {["Accept-Encoding"] = encoding})
  end
  return wrk.format("GET", path)
end

dofile(os.getenv("WRK_DONE_LUA"))
