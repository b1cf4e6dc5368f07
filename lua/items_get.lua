-- Read a session's newest items, oldest first, optionally sliding its TTL.
-- KEYS[1] the session's list
-- ARGV[1] how many items (>= 1), ARGV[2] the index to read back from (-1:
-- the newest entry), ARGV[3] how many entries to read at most (capped at
-- SCAN_LIMIT), ARGV[4] sliding TTL in ms ("0": none).
-- Skips entries that cannot be an encoded item (a msgpack map starts with
-- 0x80-0x8f, 0xde or 0xdf), reading further back in doubling windows, so
-- garbage never counts toward the limit; never the header. The caller
-- decodes fully and falls back to a full read if an entry that looked like
-- an item still fails to decode.
-- Replies ONE frame (see frame()): e, g, the index to continue from (-1:
-- done), then the items. The caller continues while it has too few; e and g
-- tell it whether the list was rewritten between its calls (appends only add
-- at the tail, so they never move an older entry).
local key, want, stop = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local budget = math.max(1, math.min(tonumber(ARGV[3]), SCAN_LIMIT))
local n, h, lo, bad = view(key)
if bad then return corrupt('header') end
if stop < 0 then stop = n - 1 end
local found = {}  -- newest first
local window = want
while #found < want and stop >= lo and budget > 0 do
  local start = math.max(lo, stop - math.min(window, budget) + 1)
  local part = redis.call('LRANGE', key, start, stop)
  for i = #part, 1, -1 do
    local e = part[i]
    if plausible(e) then
      found[#found + 1] = e
      if #found == want then break end
    end
  end
  budget = budget - #part
  stop = start - 1
  window = window * 2
end
local slide = tonumber(ARGV[4])
if slide > 0 and n > 0 then redis.call('PEXPIRE', key, slide) end
local out = {h and h.e or '', string.format('%d', h and h.g or 0), '-1'}
if #found < want and stop >= lo then out[3] = string.format('%d', stop) end
for i = #found, 1, -1 do out[#out + 1] = found[i] end
return frame(out)
