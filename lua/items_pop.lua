-- Remove and return the newest item, dropping non-items on the way.
-- KEYS[1] the session's list (lua/items_lib.lua)
-- ARGV[1] TTL in ms ('0': none), ARGV[2] token, ARGV[3] how many entries to look at at
-- most (capped at SCAN_LIMIT).
-- Replies the entry; nil when there is none; 1 when it met its limit of non-items first
-- (they are dropped; the caller calls again, with a new token). The item goes to the
-- stash at index 0, with the newest pop before it (at most POPS, within POP_BYTES), so
-- a re-sent call replies what the first run removed, and removes nothing more. A
-- session whose last item goes keeps its stash and header, and so its ring, for its TTL
-- (TOKENS_RETAIN_MS without one). Bumps v and g.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local last = redis.call('LRANGE', key, -2, -1)  -- the newest entry and the header
local h, err = head(key, last[#last] or false)
if not h then return err or false end
local r = token_find(h.ring, tok)
if r == 'i' then
  return unstash(redis.call('LINDEX', key, 0), tok) or
         redis.error_reply('RSFORGOTTEN this pop already ran; its item is no longer remembered')
end
if r then return replay(r) end
if #last < 2 or string.sub(last[1], 1, 2) == STASH then return false end  -- no items
local found, used, left = false, 1, nil
if plausible(last[1]) then
  found = last[1]
else  -- a non-item: read back in doubling windows, at most limit entries
  left = redis.call('LLEN', key) - 2
  local limit, window = math.max(1, math.min(tonumber(ARGV[3]), SCAN_LIMIT)), 1
  while not found and used < left and used < limit do
    local take = math.min(window, left - used, limit - used)
    local part = redis.call('LRANGE', key, -(used + take + 1), -(used + 2))
    for i = #part, 1, -1 do
      used = used + 1
      if plausible(part[i]) then
        found = part[i]
        break
      end
    end
    window = window * 2
  end
end
local outcome = found and 'i' or (used < left and 'm' or 'n')
h.v, h.g = h.v + 1, h.g + 1
remember(h, tok, outcome)
-- writes: the header takes the place of the last entry removed
redis.call('LTRIM', key, 0, -(used + 1))
redis.call('LSET', key, -1, dump(h))
if found then redis.call('LSET', key, 0, restash(redis.call('LINDEX', key, 0), tok, found)) end
if ttl == 0 and not left then left = redis.call('LLEN', key) - 2 + used end
expire(key, ttl, ttl > 0 and 1 or left - used)
return found or replay(outcome)
