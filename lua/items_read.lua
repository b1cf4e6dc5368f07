-- One page of a session's entries, for full reads, snapshots and forks.
-- KEYS[1] the session's list
-- ARGV[1] the first item to read (0: the oldest; the header is not counted),
-- ARGV[2] how many (capped at SCAN_LIMIT), ARGV[3] sliding TTL in ms ("0": none).
-- Replies ONE frame (see frame()): v, e, g, then the entries as stored. The
-- caller reads pages until one comes back short, and starts over if e or g
-- changed between pages (appends change neither and never move an entry).
-- The first page is one LRANGE that includes index 0 (the header).
local key, start = KEYS[1], tonumber(ARGV[1])
local count, slide = clamp(ARGV[2]), tonumber(ARGV[3])
local h, lo, part
if start == 0 then
  part = redis.call('LRANGE', key, 0, count)
  if #part > 0 then
    h, lo = zero(part[1])
  end
else
  h, lo = zero(redis.call('LINDEX', key, 0) or '')
  part = redis.call('LRANGE', key, lo + start, lo + start + count - 1)
end
if h == false then return corrupt('header') end
local out = {tostring(h and h.v or 0), h and h.e or '', tostring(h and h.g or 0)}
local first = (start == 0 and lo == 1) and 2 or 1
for i = first, math.min(#part, first + count - 1) do out[#out + 1] = part[i] end
if slide > 0 then redis.call('PEXPIRE', key, slide) end
return frame(out)
