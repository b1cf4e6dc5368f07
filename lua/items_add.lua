-- Append encoded items, atomically, and set the session's TTL. Returns v.
-- KEYS[1] the session's list
-- ARGV[1] ttl in ms ("0": none), ARGV[2] epoch if the session is new,
-- ARGV[3] token, ARGV[4..] the encoded items, oldest first.
-- A re-sent call (its token in the ring) appends nothing and returns the v
-- the first run returned. A list from before headers gets one first.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[3]
local h, why = load(key)
if why == 'corrupt' then return corrupt('header') end
if h then
  local r = find(h, tok)
  if r then return replay(r) end
end
local was_empty = why == 'none' or (h ~= nil and redis.call('LLEN', key) == 1)
if not h then h = fresh(ARGV[2]) end
-- writes
local n = #ARGV
for i = 4, n, 1000 do
  redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 999, n)))
end
h.v = h.v + 1
remember(h, tok, 'a' .. string.format('%d', h.v))
save(key, h)
expire(key, ttl, was_empty)
return h.v
