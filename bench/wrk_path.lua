-- wrk script: one fixed path (WRK_PATH), e.g. a node document or a zarr.json file.
local path = os.getenv("WRK_PATH") or "/"
function request()
  return wrk.format("GET", path)
end
dofile(os.getenv("WRK_DONE_LUA"))
