-- One page of a session's entries, for full reads, snapshots and forks.
-- KEYS[1] the session's list
-- ARGV[1] the first item to read (0: the oldest; the header is not counted),
-- ARGV[2] how many (capped at SCAN_LIMIT), ARGV[3] sliding TTL in ms ("0": none).
-- Replies ONE frame (see frame()): v, e, g, whether entries follow ('1' or '0'),
-- then the entries as stored, at most ARGV[2] and about READ_BYTES (items_lib.lua).
-- The caller reads pages while entries follow, and starts over if e or g changed
-- between pages (appends change neither and never move an entry).
local key, start = KEYS[1], tonumber(ARGV[1])
local count, slide = clamp(ARGV[2]), tonumber(ARGV[3])
local h, lo = zero(redis.call('LINDEX', key, 0) or '')
if h == false then return corrupt('header') end
-- Bytes: LRANGEs of read_cap entries (doubling from 1 where the header does not know its
-- largest entry) while fewer than READ_BYTES have been read.
local cap, known, bytes, taken = read_cap(h), h and h.b, 0, 0
local out = {tostring(h and h.v or 0), h and h.e or '', tostring(h and h.g or 0), '0'}
local window, ended = math.min(count, cap), false
while taken < count and bytes < READ_BYTES and not ended do
  local want = math.min(window, count - taken)
  local part = redis.call('LRANGE', key, lo + start + taken, lo + start + taken + want - 1)
  for i = 1, #part do
    out[#out + 1] = part[i]
    bytes = bytes + #part[i]
  end
  taken, ended = taken + #part, #part < want  -- a short LRANGE: the end of the list
  if not known then window = window * 2 end
end
if not ended then out[4] = (redis.call('LLEN', key) > lo + start + taken) and '1' or '0' end
if slide > 0 then redis.call('PEXPIRE', key, slide) end
return frame(out)
