-- Walk parent pointers inside one thread hash and return the records, newest first.
-- KEYS[1]  the thread hash
-- ARGV[1]  the id to start from    ARGV[2] most records to return
-- ARGV[3]  sliding TTL in ms ('0' = do not touch the TTL); only a walk that
--          found its first record slides it
-- Returns {status, detail, record...}; status is 'ok' (reached a root),
-- 'missing' (detail = the id not found), 'cycle' (detail = the repeated id),
-- 'depth' (detail = the next id past the limit) or 'wrongtype'.
-- Reads first; the one write (the sliding TTL) comes last.
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind == 'none' then return {'missing', ARGV[1]} end
if kind ~= 'hash' then return {'wrongtype', kind} end

local out = {'ok', ''}
local cur, n, limit, seen = ARGV[1], 0, tonumber(ARGV[2]), {}
while cur ~= '' do
  if seen[cur] then out[1] = 'cycle'; out[2] = cur; break end
  if n >= limit then out[1] = 'depth'; out[2] = cur; break end
  seen[cur] = true
  local rec = redis.call('HMGET', key, 'd:' .. cur, 'p:' .. cur)
  if not rec[1] then out[1] = 'missing'; out[2] = cur; break end
  n = n + 1
  out[n + 2] = rec[1]
  cur = rec[2] or ''
end

local ttl = tonumber(ARGV[3])
if ttl > 0 and n > 0 then
  local left = redis.call('PTTL', key)
  if left >= 0 and left < ttl then redis.call('PEXPIRE', key, ttl) end
end
return out
