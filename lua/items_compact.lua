-- Replace the first N items with a compacted list, only if nothing but appends happened
-- since they were read (1), else 0 and nothing changes.
-- KEYS[1] the session's list (lua/items_lib.lua)
-- ARGV[1] TTL in ms ('0': none), ARGV[2] the epoch and ARGV[3] the rewrites (g) seen at
-- read time, ARGV[4] N (entries read), ARGV[5] token, ARGV[6] max_items ('0': none),
-- ARGV[7..] the replacement items.
-- Pops, clears and compactions bump g; a clear, a fork onto the id and expiry change the
-- epoch. Appends change neither and only add after the items, so items 1..N are exactly
-- what was read, and anything after them stays after the replacement. Refused (RSFULL)
-- past MAX_BATCH_ITEMS replacement items, or if the session would grow past max_items
-- (one that shrinks is never refused). A re-sent call replies 1.
-- The N entries go in one LTRIM, which frees their memory then and there: its time grows
-- with their bytes, not their count (a list's entries are packed into nodes of about
-- 8 KB, and whole nodes are freed), as DEL's or the key's expiry's would. An UNLINK
-- (freed later, in the background) would need the key gone and made again within the
-- script, which a slot being migrated refuses halfway, after the UNLINK.
local key, ttl, tok, n = KEYS[1], tonumber(ARGV[1]), ARGV[5], tonumber(ARGV[4])
local refusal, longest, push, fresh = writes()
local h, err = head(key)
if err then return err end
if not h then return 0 end
local r = token_find(h.ring, tok)
if r == false then return token_reused() end
if r then return again(replay(r)) end
if h.e ~= ARGV[2] or h.g ~= tonumber(ARGV[3]) or h.n < n then return 0 end
if redis.call('LLEN', key) ~= h.n + 4 then return redis.error_reply('RSCORRUPT ' .. key .. ' counts items it does not hold') end
local had, count = h.n, #ARGV - 6
h.n = had - n + count
err = refusal(count, h.n, h.n > had and ARGV[6] or '0')
if err then return err end
h.v, h.g, h.b = h.v + 1, h.g + 1, math.max(h.b, longest(ARGV, 7))
remember(h, tok, 'c')
-- writes. The key never stops existing in between: on a slot being migrated, a key that
-- vanished and came back within one script is refused halfway, after the first writes.
if had > n then
  -- Items were appended after the ones read: keep those alone, then push the
  -- replacement and the stash before them (LPUSH a b c makes c b a), the ring and
  -- the header after.
  local stash = redis.call('LRANGE', key, 0, 1)
  redis.call('LTRIM', key, n + 2, -3)
  local hi = #ARGV
  while hi >= 7 do
    local lo, chunk = math.max(7, hi - 999), {}
    for i = hi, lo, -1 do chunk[#chunk + 1] = ARGV[i] end
    redis.call('LPUSH', key, unpack(chunk))
    hi = lo - 1
  end
  redis.call('LPUSH', key, stash[2], stash[1])
  push(key, ARGV, #ARGV + 1, h, ttl)
else
  -- The N items are all there is: keep the stash, push the replacement, ring and header.
  redis.call('LTRIM', key, 0, 1)
  push(key, ARGV, 7, h, ttl)
end
return 1
