-- Remove and return the newest item, dropping non-items on the way.
-- KEYS[1] the session's list (lua/items_lib.lua)
-- ARGV[1] TTL in ms ('0': none), ARGV[2] token, ARGV[3] how many entries to look at at
-- most (capped at SCAN_LIMIT).
-- Replies the entry; nil when there is none; 1 when it met its limit of non-items first
-- (they are dropped; the caller calls again, with a new token). The entry goes into the
-- stash slot of the older pop, which the newest one's keeps while both fit in POP_BYTES,
-- so a re-sent call replies what the first run removed and removes nothing more. A
-- session whose last item goes keeps its stash, ring and header for its TTL
-- (TOKENS_RETAIN_MS without one). Bumps v and g.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]

-- Whether an entry starts as a stored value of data format 1 does (redis_sessions/codec.py):
-- the marker 0xc1, then a byte whose high four bits are the format.
local function plausible(e)
  local a, b = string.byte(e, 1, 2)
  return a == 193 and b ~= nil and b >= 16 and b < 32
end

local tail = redis.call('LRANGE', key, -3, -1)  -- the newest entry, the ring, the header
local h, err = head(key, tail)
if not h then return err or false end
local r = token_find(h.ring, tok)
if r == 'i' then
  local want = STASH .. tok .. '\n'
  for _, slot in ipairs(redis.call('LRANGE', key, 0, 1)) do
    if string.sub(slot, 1, #want) == want then return again(string.sub(slot, #want + 1)) end
  end
  return redis.error_reply('RSFORGOTTEN this pop already ran; its item is no longer remembered')
end
if r then return again(replay(r)) end
if h.n == 0 then return false end
local found, used, left = false, 1, h.n
if plausible(tail[1]) then
  found = tail[1]
else  -- a non-item: read back in doubling windows, at most limit entries
  left = redis.call('LLEN', key) - 4  -- counted again: it drops what it reads
  if left < 1 then return redis.error_reply('RSCORRUPT ' .. key .. ' counts items it does not hold') end
  local limit, window = math.max(1, math.min(tonumber(ARGV[3]), SCAN_LIMIT)), 1
  while not found and used < left and used < limit do
    local take = math.min(window, left - used, limit - used)
    local part = redis.call('LRANGE', key, -(used + take + 2), -(used + 3))
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
local outcome, slot, drop = found and 'i' or (used < left and 'm' or 'n'), 1 - h.p, false
if found then  -- it goes in the older pop's slot; the newer pop stays while both fit
  local size = #tok + 1 + #found
  drop = h.s + size > POP_BYTES
  h.p, h.s = slot, size
end
h.v, h.g, h.n = h.v + 1, h.g + 1, left - used
remember(h, tok, outcome)
-- writes: the ring and the header take the place of what was removed
redis.call('LTRIM', key, 0, -(used + 3))
redis.call('RPUSH', key, h.ring, dump(h))
if found then
  redis.call('LSET', key, slot, STASH .. tok .. '\n' .. found)
  if drop then redis.call('LSET', key, 1 - slot, STASH) end
end
if ttl > 0 then
  redis.call('PEXPIRE', key, ttl)
elseif h.n == 0 then  -- emptied: its ring goes after a while
  redis.call('PEXPIRE', key, TOKENS_RETAIN_MS)
end
return found or replay(outcome)
