-- Replace the first N entries with a compacted list, only if nothing but
-- appends happened since they were read (1), else 0 and nothing changes.
-- KEYS[1] items list, KEYS[2] meta hash
-- ARGV[1] ttl in ms ("0": leave TTL alone), ARGV[2] epoch and ARGV[3]
-- rewrites (g) seen at read time, ARGV[4] N (entries read),
-- ARGV[5..] replacement items.
-- Pop and compaction bump g; clear and expiry delete meta, and a recreated
-- session gets a new epoch. Appends change neither and only add at the tail,
-- so entries 0..N-1 are exactly what was read, and anything after them is
-- kept after the replacement.
local meta = redis.call('HMGET', KEYS[2], 'e', 'g')
if meta[1] ~= ARGV[2] or (meta[2] or '0') ~= ARGV[3] then return 0 end
local n = tonumber(ARGV[4])
if redis.call('LLEN', KEYS[1]) < n then return 0 end
if n > 0 then redis.call('LTRIM', KEYS[1], n, -1) end
-- LPUSH a b c yields c b a: push the replacement newest first, in chunks.
local hi = #ARGV
while hi >= 5 do
  local lo = math.max(5, hi - 999)
  local chunk = {}
  for i = hi, lo, -1 do chunk[#chunk + 1] = ARGV[i] end
  redis.call('LPUSH', KEYS[1], unpack(chunk))
  hi = lo - 1
end
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('DEL', KEYS[2])
  return 1
end
redis.call('HINCRBY', KEYS[2], 'v', 1)
redis.call('HINCRBY', KEYS[2], 'g', 1)
local ttl = tonumber(ARGV[1])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
end
return 1
