-- Append encoded items, atomically, and set the session's TTL. Returns v.
-- KEYS[1] the session's list (lua/items_lib.lua)
-- ARGV[1] TTL in ms ('0': none), ARGV[2] the epoch if the session is new, ARGV[3] token,
-- ARGV[4] max_items ('0': none), ARGV[5..] the encoded items, oldest first.
-- A re-sent call (its token in the ring) appends nothing and returns the v the first
-- run returned. Refused (RSFULL) past MAX_BATCH_ITEMS items in the call, or past
-- max_items in the session. Its work is the call's items and the header: no command
-- here depends on the list's length.
local key, ttl, tok, cap = KEYS[1], tonumber(ARGV[1]), ARGV[3], ARGV[4]
local h, err = head(key)
if err then return err end
local items = 0
if h then
  local r = token_find(h.ring, tok)
  if r == false then return token_reused() end
  if r then return replay(r) end
  if cap ~= '0' then items = redis.call('LLEN', key) - 2 end
end
err = refusal(#ARGV - 4, items + #ARGV - 4, cap)
if err then return err end
if not h then h = fresh(ARGV[2]) end
h.v, h.b = h.v + 1, math.max(h.b, longest(ARGV, 5))
remember(h, tok, 'a' .. h.v)
-- writes: the first item takes the header's place, the header goes after the last
if h.new then
  redis.call('RPUSH', key, STASH)
  push(key, ARGV, 5, dump(h))
else
  redis.call('LSET', key, -1, ARGV[5])
  push(key, ARGV, 6, dump(h))
end
expire(key, ttl, 1)
return h.v
