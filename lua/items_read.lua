-- A consistent snapshot of a whole session: {v, e, g, item...}.
-- KEYS[1] items list, KEYS[2] meta hash
-- ARGV[1] sliding TTL in ms ("0": none)
-- Used by fork (the copy is this snapshot) and by compaction (e, g and the
-- number of entries read guard the later replacement).
local meta = redis.call('HMGET', KEYS[2], 'v', 'e', 'g')
local out = redis.call('LRANGE', KEYS[1], 0, -1)
table.insert(out, 1, meta[3] or '0')
table.insert(out, 1, meta[2] or '')
table.insert(out, 1, meta[1] or '0')
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return out
