-- One page of a session's entries, for full reads, snapshots and forks.
-- KEYS[1] the session's list
-- ARGV[1] the first item to read (0: the oldest; the header is not counted),
-- ARGV[2] how many (capped at SCAN_LIMIT), ARGV[3] sliding TTL in ms ("0": none).
-- Replies ONE frame (see frame()): v, e, g, then the entries as stored. The
-- caller reads pages until one comes back short, and starts over if e or g
-- changed between pages (appends change neither and never move an entry).
local key, start = KEYS[1], tonumber(ARGV[1])
local count = math.max(1, math.min(tonumber(ARGV[2]), SCAN_LIMIT))
local n, h, lo, bad = view(key)
if bad then return corrupt('header') end
local out = {string.format('%d', h and h.v or 0), h and h.e or '', string.format('%d', h and h.g or 0)}
if n > lo + start then
  local part = redis.call('LRANGE', key, lo + start, lo + start + count - 1)
  for i = 1, #part do out[#out + 1] = part[i] end
end
local slide = tonumber(ARGV[3])
if slide > 0 and n > 0 then redis.call('PEXPIRE', key, slide) end
return frame(out)
