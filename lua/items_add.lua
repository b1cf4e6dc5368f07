-- Append encoded items, atomically, and set the session's TTL. Returns v.
-- KEYS[1] the session's list
-- ARGV[1] ttl in ms ("0": none), ARGV[2] epoch if the session is new,
-- ARGV[3] token, ARGV[4..] the encoded items, oldest first.
-- A re-sent call (its token in the ring) appends nothing and returns the v
-- the first run returned. A list from before headers gets one first. Refused
-- (RSFULL) past MAX_ITEMS items (entries below the header, the stash aside).
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
if len + n - 3 > MAX_ITEMS then return full(len + n - 3) end
if not h then
  h = fresh(ARGV[2])
  if why == 'old' then h.b = nil end  -- a list from before headers: its largest is not known
end
if h.b then h.b = math.max(h.b, longest(ARGV, 4)) end
h.v = h.v + 1
remember(h, tok, 'a' .. h.v)
-- writes
for i = 4, n, 1000 do
  redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 999, n)))
end
save(key, h)
expire(key, ttl, 1, len == 0)
return h.v
