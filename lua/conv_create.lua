-- Create a conversation with its first items.
-- KEYS[1] the conversation's hash
-- ARGV[1] ttl in ms ("0": none), ARGV[2] token, ARGV[3] created_at, ARGV[4] metadata,
-- ARGV[5..] item id, item, ... oldest first (sequence numbers 1..n).
-- Replies {'ok'}, or {'exists'} if the id is taken (never, for a minted id,
-- except by this very write re-sent: its token is then in the ring).
local key, ttl, tok = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local hdr = redis.call('HMGET', key, 'c', 'ops')
if find(hdr[2], tok) then return {'ok'} end
if hdr[1] or hdr[2] then return {'exists'} end
-- writes
local n = math.floor((#ARGV - 4) / 2)
local args = {'c', ARGV[3], 'm', ARGV[4], 'n', tostring(n), 'ops', remember(false, tok, 'c')}
for j = 1, n do
  local id, item = ARGV[3 + 2 * j], ARGV[4 + 2 * j]
  args[#args + 1] = 'i:' .. j
  args[#args + 1] = item
  args[#args + 1] = 'x:' .. id
  args[#args + 1] = tostring(j)
end
redis.call('HSET', key, unpack(args))
expire(key, ttl)
return {'ok'}
