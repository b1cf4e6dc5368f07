-- Delete one item. Its x:<id> field stays, so a cursor naming it still pages.
-- KEYS[1] the conversation's hash
-- ARGV[1] ttl in ms ("0": none), ARGV[2] token, ARGV[3] the item id.
-- Replies {'ok', created_at, metadata}, {'nf'} or {'inf'} (no such live item).
-- A re-sent call writes nothing and replies as the first did.
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local hdr = redis.call('HMGET', key, 'c', 'm', 'ops', 'x:' .. ARGV[3])
if not hdr[1] then return {'nf'} end
if find(hdr[3], tok) then return {'ok', hdr[1], hdr[2]} end
local seq = hdr[4]
if not seq or redis.call('HEXISTS', key, 'i:' .. seq) == 0 then return {'inf'} end
-- writes
redis.call('HDEL', key, 'i:' .. seq)
redis.call('HSET', key, 'ops', remember(hdr[3], tok, 'd'))
expire(key, ttl)
return {'ok', hdr[1], hdr[2]}
