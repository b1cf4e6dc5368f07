-- Clear a session: drop every item and the stash; keep the ring and a header with a new
-- epoch, which go after min(TTL, TOKENS_RETAIN_MS).
-- KEYS[1] the session's list (lua/items_lib.lua)
-- ARGV[1] TTL in ms ('0': none), ARGV[2] the new epoch, ARGV[3] token.
-- Replies 1, or 0 when there is no key (nothing is written). A re-sent call replies 1
-- and writes nothing, so a clear re-sent after another client's add does not remove
-- that add. A format-1 session that is damaged is deleted whole; a list of another data
-- format is refused (RSVERSION).
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[3]
local h, err = head(key)
if err then
  if string.sub(err.err, 1, 10) ~= 'RSCORRUPT ' then return err end
  redis.call('UNLINK', key)  -- not made again: its memory may go in the background
  return 1
end
if not h then return 0 end
if token_find(h.ring, tok) then return again(1) end
local c = select(4, writes())(ARGV[2])
c.v, c.g, c.ring = h.v + 1, h.g + 1, h.ring
remember(c, tok, 'z')
-- writes. The key is kept, not deleted and made again: on a slot being migrated, a key
-- made again within one script is refused halfway. So the items go in one LTRIM, freed
-- then and there: its time grows with their bytes, not their count (items_compact.lua).
redis.call('LTRIM', key, 0, 0)
redis.call('LSET', key, 0, STASH)
redis.call('RPUSH', key, STASH, c.ring, dump(c))
redis.call('PEXPIRE', key, (ttl > 0 and ttl < TOKENS_RETAIN_MS) and ttl or TOKENS_RETAIN_MS)
return 1
