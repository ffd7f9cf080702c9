-- wrk script: cycles through a fixed list of request paths (bench/edr_check.py writes
-- them, one "/path?query" a line), so that every server is asked the same questions.
--   EDR_LIST      the list file
--   WRK_DONE_LUA  bench/wrk_done.lua (the WRKJSON summary line)
-- Thread N starts at a different place in the list (N-1 times a stride), then goes round.
-- Each response is counted: status 200 with a body as ok_200, anything else as bad
-- (one WRKCHECK line), so a run of errors cannot pass for a fast one.
local list_path = os.getenv("EDR_LIST")

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("id", counter)
  table.insert(threads, thread)
end

local reqs = {}
local pos = 1
ok_200, bad = 0, 0

function init(args)
  for line in io.lines(list_path) do
    if #line > 0 then
      reqs[#reqs + 1] = wrk.format("GET", line)
    end
  end
  pos = (((id or 1) - 1) * 7) % #reqs + 1
end

function request()
  local r = reqs[pos]
  pos = pos % #reqs + 1
  return r
end

function response(status, headers, body)
  if status == 200 and body and #body > 0 then
    ok_200 = ok_200 + 1
  else
    bad = bad + 1
  end
end

dofile(os.getenv("WRK_DONE_LUA"))
local summary_done = done

function done(summary, latency, requests)
  summary_done(summary, latency, requests)
  local ok, nok = 0, 0
  for _, t in ipairs(threads) do
    ok = ok + t:get("ok_200")
    nok = nok + t:get("bad")
  end
  io.write(string.format('WRKCHECK {"ok_200":%d,"bad":%d}\n', ok, nok))
end
