-- Create a forked session only if none exists under that id (1), else 0.
-- KEYS[1] target items list, KEYS[2] target meta hash
-- ARGV[1] ttl in ms ("0": none), ARGV[2] epoch, ARGV[3] source session id,
-- ARGV[4] source version the copy was taken at, ARGV[5..] encoded items.
if redis.call('EXISTS', KEYS[1], KEYS[2]) > 0 then return 0 end
local n = #ARGV
if n < 5 then return 1 end
for i = 5, n, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, n)))
end
redis.call('HSET', KEYS[2], 'v', 1, 'e', ARGV[2], 'forked_from', ARGV[3], 'forked_at', ARGV[4])
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
