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
-- The usual call is the header (LINDEX 0: the largest entry it knows bounds the read's
-- bytes) and one LRANGE of the newest entries.
-- Replies ONE frame (see frame()): e, g, the index to continue from (-1:
-- done), then the items. The caller continues while it has too few; e and g
-- tell it whether the list was rewritten between its calls (appends only add
-- at the tail, so they never move an older entry).
local key, want, stop = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2])
local budget, slide = clamp(ARGV[3]), tonumber(ARGV[4])
local h, lo = zero(redis.call('LINDEX', key, 0) or '')
if h == false then return corrupt('header') end
-- Bytes: one LRANGE takes at most read_cap entries (READ_BYTES at the largest entry the
-- header knows; from 1, doubling, where it does not), and none starts past READ_BYTES.
local cap, known, bytes = read_cap(h), h and h.b, 0
local found, window = {}, math.min(want, cap)
local function take(part)
  for i = #part, 1, -1 do
    local e = part[i]
    bytes = bytes + #e
    if plausible(e) then
      found[#found + 1] = e
      if #found == want then return end
    end
  end
end
if stop < 0 then
  local w = math.min(window, budget)
  local part = redis.call('LRANGE', key, -w, -1)
  budget, window = budget - #part, known and math.min(want, cap) or w * 2
  take(part)
  local n = #part
  if n == w then n = redis.call('LLEN', key) end
  stop = n - #part - 1
end
while #found < want and stop >= lo and budget > 0 and bytes < READ_BYTES do
  local start = math.max(lo, stop - math.min(window, budget) + 1)
  local part = redis.call('LRANGE', key, start, stop)
  take(part)
  budget = budget - #part
  stop = start - 1
  if not known then window = window * 2 end
end
if slide > 0 then redis.call('PEXPIRE', key, slide) end
local out = {h and h.e or '', h and h.g or 0, -1}
if #found < want and stop >= lo then out[3] = stop end
for i = 1, 3 do out[i] = tostring(out[i]) end
for i = #found, 1, -1 do out[#out + 1] = found[i] end
return frame(out)
