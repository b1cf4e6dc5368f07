-- Append encoded items, atomically, and set the session's TTL. Returns v.
-- KEYS[1] the session's list
-- ARGV[1] ttl in ms ("0": none), ARGV[2] epoch if the session is new,
-- ARGV[3] token, ARGV[4] max_items ("0": none), ARGV[5..] the encoded items,
-- oldest first.
-- A re-sent call (its token in the ring) appends nothing and returns the v
-- the first run returned. A list from before headers gets one first. Refused
-- (RSFULL) past MAX_BATCH_ITEMS items in the call, or past max_items in the
-- session (entries below the header, the stash aside). Its work is the call's
-- items and the header: no command here depends on the list's length.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[3]
local h, why = load(key)
if why == 'corrupt' then return corrupt('header') end
local len = 0
if h then
  local r = find(h, tok)
  if r == false then return token_reused() end
  if r then return replay(r) end
  len = redis.call('LLEN', key) - 1 - (hinted(h) and 1 or 0)  -- the stash is no item
elseif why == 'old' then
  len = redis.call('LLEN', key)
end
local n = #ARGV
local err = refusal(n - 4, len + n - 4, ARGV[4])
if err then return err end
if not h then
  h = fresh(ARGV[2])
  if why == 'old' then h.b = nil end  -- a list from before headers: its largest is not known
end
if h.b then h.b = math.max(h.b, longest(ARGV, 5)) end
h.v = h.v + 1
remember(h, tok, 'a' .. h.v)
-- writes
for i = 5, n, 1000 do
  redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 999, n)))
end
save(key, h)
expire(key, ttl, 1, len == 0)
return h.v
