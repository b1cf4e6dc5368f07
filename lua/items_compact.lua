-- Replace the first N items with a compacted list, only if nothing but
-- appends happened since they were read (1), else 0 and nothing changes.
-- KEYS[1] the session's list
-- ARGV[1] ttl in ms ("0": none), ARGV[2] epoch and ARGV[3] rewrites (g)
-- seen at read time, ARGV[4] N (items read), ARGV[5] token, ARGV[6] max_items
-- ("0": none), ARGV[7..] the replacement items.
-- Pop, clear and compaction bump g; clear, a fork onto the id and expiry
-- change the epoch. Appends change neither and only add at the tail, so
-- items 1..N (index 0 is the header) are exactly what was read, and anything
-- after them stays after the replacement. A stash (index 1) is one of the N
-- entries read, so it goes too. Refused (RSFULL) past MAX_BATCH_ITEMS
-- replacement items, or if the session would grow past max_items entries (one
-- that shrinks is never refused). A re-sent call replies 1.
-- The N entries go in one LTRIM, which frees their memory then and there: its
-- time grows with their bytes, not their count (a list's entries are packed
-- into nodes of about 8 KB, and whole nodes are freed), as DEL's or the key's
-- expiry's would. An UNLINK (freed later, in the background) would need the
-- key gone and made again within the script, which a slot being migrated
-- refuses halfway, after the UNLINK.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[5]
local h, why = load(key)
if why == 'corrupt' then return corrupt('header') end
if not h then return 0 end
local r = find(h, tok)
if r == false then return token_reused() end
if r then return replay(r) end
if h.e ~= ARGV[2] or h.g ~= tonumber(ARGV[3]) then return 0 end
local n = tonumber(ARGV[4])
local len = redis.call('LLEN', key)
if len - 1 < n then return 0 end
local items = len - 1 - n + #ARGV - 6
local err = refusal(#ARGV - 6, items, items > len - 1 and ARGV[6] or '0')
if err then return err end
h.v, h.g = h.v + 1, h.g + 1
if h.b then h.b = math.max(h.b, longest(ARGV, 7)) end
remember(h, tok, 'c', false)
-- writes. The key never stops existing in between: on a slot being migrated,
-- a key that vanished and came back within one script is refused halfway,
-- and the writes before the refusal would stay.
if len - 1 > n then
  -- Items were appended after the ones read: drop the header and the N items,
  -- then push the replacement (newest first, LPUSH a b c yields c b a) and the header.
  redis.call('LTRIM', key, n + 1, -1)
  local hi = #ARGV
  while hi >= 7 do
    local lo = math.max(7, hi - 999)
    local chunk = {}
    for i = hi, lo, -1 do chunk[#chunk + 1] = ARGV[i] end
    redis.call('LPUSH', key, unpack(chunk))
    hi = lo - 1
  end
  h.new = true
else
  -- The N items are all there is: keep the header, append the replacement.
  redis.call('LTRIM', key, 0, 0)
  for i = 7, #ARGV, 1000 do
    redis.call('RPUSH', key, unpack(ARGV, i, math.min(i + 999, #ARGV)))
  end
end
save(key, h)
expire(key, ttl, items, len == 1 or (len == 2 and hinted(h)))
return 1
