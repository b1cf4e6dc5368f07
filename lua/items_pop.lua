-- Remove and return the newest plausible item, dropping non-items on the way.
-- KEYS[1] the session's list
-- ARGV[1] ttl in ms ("0": none), ARGV[2] epoch for a list from before
-- headers, ARGV[3] token, ARGV[4] how many entries to drop at most (capped
-- at SCAN_LIMIT).
-- Replies the entry; nil when there is none; 1 when it dropped its limit of
-- non-items and stopped (the caller calls again, with a new token). Never
-- pops the header: a session whose last entry goes keeps its header, and so
-- its ring, for its TTL (RETAIN_MS without one). A re-sent call replies what
-- the first run replied and removes nothing more. Bumps v and g.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[3]
local limit = math.max(1, math.min(tonumber(ARGV[4]), SCAN_LIMIT))
local h, why = load(key)
if why == 'corrupt' then return corrupt('header') end
if why == 'none' then return false end
if h then
  local r = find(h, tok)
  if r then return replay(r) end
end
local left = redis.call('LLEN', key) - (h and 1 or 0)
if left == 0 then return false end
if not h then h = fresh(ARGV[2]) end
-- writes
local found, dropped = false, 0
while left > 0 and dropped < limit do
  local e = redis.call('RPOP', key)
  left = left - 1
  if plausible(e) then
    found = e
    break
  end
  dropped = dropped + 1
end
local result = 'n'
if found then result = 'i' .. found elseif left > 0 then result = 'm' end
h.v, h.g = h.v + 1, h.g + 1
remember(h, tok, result)
save(key, h)
expire(key, ttl, false)
return replay(result)
