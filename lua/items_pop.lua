-- Remove and return the newest plausible item, dropping non-items on the way.
-- KEYS[1] the session's list
-- ARGV[1] ttl in ms ("0": none), ARGV[2] epoch for a list from before
-- headers, ARGV[3] token, ARGV[4] how many entries to look at at most
-- (capped at SCAN_LIMIT).
-- Replies the entry; nil when there is none; 1 when it met its limit of
-- non-items first (they are dropped; the caller calls again, with a new
-- token). Never pops the header or the stash: a session whose last item goes
-- keeps them, and so its ring, for its TTL (TOKENS_RETAIN_MS without one). The item
-- goes to the stash at index 1, not to the header, so later writes do not
-- carry it. A re-sent call replies what the first run replied (its item from
-- the stash) and removes nothing more. Reads the tail in doubling windows
-- first, then removes what it read with one LTRIM: all checks before the
-- first write. Bumps v and g.
local key, ttl, tok, limit = KEYS[1], tonumber(ARGV[1]), ARGV[3], clamp(ARGV[4])
local h, why = load(key)
if why == 'corrupt' then return corrupt('header') end
if why == 'none' then return false end
if h then
  local r = find(h, tok)
  if r == false then return token_reused() end
  if r == 'i' then return unstash(stash(key, h), tok) or replay('x') end
  if r then return replay(r) end
end
local s = stash(key, h)
local len = redis.call('LLEN', key)
local left = len - (h and 1 or 0) - (s ~= '' and 1 or 0)
if left == 0 then return false end
if not h then h = fresh(ARGV[2]) end
local found, used, window = false, 0, 1
while not found and used < left and used < limit do
  local take = math.min(window, left - used, limit - used)
  local part = redis.call('LRANGE', key, -(used + take), -(used + 1))
  for i = #part, 1, -1 do
    used = used + 1
    if plausible(part[i]) then
      found = part[i]
      break
    end
  end
  window = window * 2
end
local result = 'n'
if found then result = 'i' elseif used < left then result = 'm' end
h.v, h.g = h.v + 1, h.g + 1
remember(h, tok, result, found and true or nil)
-- writes. The key never stops existing in between (see items_compact.lua): a
-- list from before headers gets its header (and stash) before its entries go.
if h.new then
  if found then redis.call('LPUSH', key, restash('', tok, found)) end
  redis.call('LPUSH', key, dump(h))
  redis.call('LTRIM', key, 0, -(used + 1))
else
  redis.call('LTRIM', key, 0, -(used + 1))
  if found and s ~= '' then
    redis.call('LSET', key, 1, restash(s, tok, found))
  elseif found then  -- the stash goes in at index 1: in place of the header, then the header before it
    redis.call('LSET', key, 0, restash('', tok, found))
    h.new = true
  end
  save(key, h)
end
expire(key, ttl, left - used, false)
if found then return found end
return replay(result)
