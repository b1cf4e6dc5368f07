-- Append encoded items to a session, atomically, and set the session's TTL.
-- KEYS[1] items list, KEYS[2] meta hash (same hash tag, so same slot)
-- ARGV[1] ttl in ms ("0": leave TTL alone), ARGV[2] epoch for a new session,
-- ARGV[3..] the encoded items, oldest first.
-- Meta (see redis_sessions/items/base.py): v version, e epoch, g rewrites.
-- An append bumps v only. Returns v.
local n = #ARGV
for i = 3, n, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, n)))
end
local v = redis.call('HINCRBY', KEYS[2], 'v', 1)
redis.call('HSETNX', KEYS[2], 'e', ARGV[2])
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return v
