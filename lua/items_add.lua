-- Append encoded items, atomically, and set the session's TTL. Returns v.
-- KEYS[1] the session's list (lua/items_lib.lua)
-- ARGV[1] TTL in ms ('0': none), ARGV[2] the epoch if the session is new, ARGV[3] token,
-- ARGV[4] max_items ('0': none), ARGV[5..] the encoded items, oldest first.
-- A re-sent call (its token in the ring) appends nothing and returns the v the first
-- run returned. Refused (RSFULL) past MAX_BATCH_ITEMS items in the call, or past
-- max_items in the session. Its work is the call's items and the list's last two
-- entries: no command here depends on the list's length.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[3]
local refusal, longest, push, fresh = writes()
local h, err = head(key)
if err then return err end
if h then
  local r = token_find(h.ring, tok)
  if r == false then return token_reused() end
  if r then return again(replay(r)) end
end
local count = #ARGV - 4
err = refusal(count, (h and h.n or 0) + count, ARGV[4])
if err then return err end
if not h then h = fresh(ARGV[2]) end
h.v, h.n, h.b = h.v + 1, h.n + count, math.max(h.b, longest(ARGV, 5))
remember(h, tok, 'a' .. h.v)
-- writes: the items go where the ring and the header were, and those after them
if h.new then redis.call('RPUSH', key, STASH, STASH) else redis.call('LTRIM', key, 0, -3) end
push(key, ARGV, 5, h, ttl)
return h.v
