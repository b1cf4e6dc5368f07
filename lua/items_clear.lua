-- Clear a session: drop every item, keep a header with a new epoch and the
-- ring (the stash of popped entries goes), which goes after min(TTL, TOKENS_RETAIN_MS).
-- KEYS[1] the session's list
-- ARGV[1] ttl in ms ("0": none), ARGV[2] new epoch, ARGV[3] token.
-- Replies 1, or 0 when there is no key (nothing is written). A re-sent call
-- replies 1 and writes nothing, so a clear re-sent after another client's
-- add does not remove that add. A damaged header or ring does not stop a
-- clear: the key is deleted whole.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[3]
local h, why = load(key)
if why == 'none' then return 0 end
local c = fresh(ARGV[2])
if h then
  local r = find(h, tok)
  if r then return replay(r) end
  c.v, c.g = h.v + 1, h.g + 1
  inherit(c, h, false)
end
if why ~= 'corrupt' then remember(c, tok, 'z') end
-- writes
if why == 'corrupt' then
  redis.call('UNLINK', key)  -- not made again: its memory may go in the background
  return 1
end
-- Keep the header entry and rewrite it, rather than delete and recreate the key:
-- on a slot being migrated, a key recreated within one script is refused halfway.
-- So the items go in one LTRIM, freed then and there: its time grows with their
-- bytes, not their count (see items_compact.lua).
redis.call('LTRIM', key, 0, 0)
c.new = false
save(key, c)
if ttl > 0 and ttl < TOKENS_RETAIN_MS then
  redis.call('PEXPIRE', key, ttl)
else
  redis.call('PEXPIRE', key, TOKENS_RETAIN_MS)
end
return 1
